package agent

import (
	"os"
	"sync"
	"syscall"

	osproc "github.com/converge-go/converge/examples/internal/proc"
)

// runner starts the containers' processes: OS processes (osRunner), or
// fake ones (fakeRunner) for a large cluster on one machine.
type runner interface {
	// Start starts command for pod name, its output to out, and returns
	// its pid and a function that waits until it ended.
	Start(name string, command []string, out *os.File) (pid int, wait func() osproc.Exit, err error)
	// Signal sends SIGTERM, or SIGKILL if kill, to the process pid.
	Signal(pid int, kill bool)
	// Close releases the runner once every process it started is gone.
	Close()
}

// osRunner runs OS processes (package examples/internal/proc).
type osRunner struct{ *osproc.Runner }

func (osRunner) Signal(pid int, kill bool) { osproc.Signal(pid, kill) }

// fakeRunner's processes exist only in the agent: each runs until it is
// signalled, and ends as a signalled process would. Their pids count up
// from one above any real pid (Linux's pid_max is at most 2^22), so that
// nobody can kill a real process by one.
type fakeRunner struct {
	mu    sync.Mutex
	next  int
	procs map[int]chan syscall.Signal
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{next: 1 << 22, procs: map[int]chan syscall.Signal{}}
}

func (r *fakeRunner) Start(string, []string, *os.File) (int, func() osproc.Exit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	pid, sig := r.next, make(chan syscall.Signal, 1)
	r.procs[pid] = sig
	return pid, func() osproc.Exit {
		s := <-sig
		return osproc.Exit{Code: -1, Signal: s, Text: "signal: " + s.String()}
	}, nil
}

func (r *fakeRunner) Signal(pid int, kill bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sig, ok := r.procs[pid]
	if !ok {
		return
	}
	delete(r.procs, pid)
	s := syscall.SIGTERM
	if kill {
		s = syscall.SIGKILL
	}
	sig <- s
}

func (r *fakeRunner) Close() {}
