package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

// Children starts a program's helper processes (a control plane, node
// agents) so that they die with it: on Linux the kernel SIGKILLs each when
// this process ends, even by SIGKILL; on other systems a SIGKILL leaves
// them running. Unlike Runner's, they stay in this process's process group,
// so that a Ctrl-C at the terminal reaches them too. Create it with
// NewChildren; Close it once every process it started is gone.
type Children struct {
	sp *spawner
}

// NewChildren returns a Children.
func NewChildren() *Children { return &Children{sp: newSpawner()} }

// Start starts cmd as exec.Cmd.Start does, with the parent-death signal
// added to cmd.SysProcAttr (created if nil, its other fields kept). It
// returns an error for a nil cmd. Not after Close.
func (c *Children) Start(cmd *exec.Cmd) error {
	if cmd == nil {
		return errors.New("proc: Children.Start of a nil command")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	dieWithParent(cmd.SysProcAttr)
	return c.sp.start(cmd)
}

// Close releases the thread the processes were started from. Call it
// once they have all been waited for: on Linux the kernel may then kill
// any still running, as their parent-death signal follows that thread
// (unless Go keeps the thread, which it does for the process's main
// thread; they still die with the process).
func (c *Children) Close() { c.sp.close() }
