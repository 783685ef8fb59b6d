package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr puts a pod's process in its own process group, and has the
// kernel SIGKILL it when the agent dies, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(a)
	return a
}

// dieWithParent has the kernel SIGKILL the process when the thread that
// started it ends, which a spawner makes the end of this process.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// spawner starts processes from one goroutine locked to its OS thread.
// The parent-death signal fires when the thread that started the child
// exits, not the process (golang.org/issue/27505), and Go may end idle
// threads; a thread that lives as long as the agent is safe.
type spawner struct {
	reqs chan spawnReq
	once sync.Once
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for r := range s.reqs {
			r.reply <- r.cmd.Start()
		}
	}()
	return s
}

// start starts cmd; not after close.
func (s *spawner) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	s.reqs <- spawnReq{cmd, reply}
	return <-reply
}

// close ends the spawner's thread, once every process it started is gone.
func (s *spawner) close() { s.once.Do(func() { close(s.reqs) }) }
