// Package proc runs the examples' pods as OS processes: each in a process
// group of its own, killed by the kernel when the agent that started it dies
// (on Linux, even by SIGKILL), and the small worker program the pods run.
// Children starts a program's other helper processes so that they, too, die
// with it.
package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// ErrInvalidCommand marks a command that cannot be started: not found, not
// executable. No retry can start it.
var ErrInvalidCommand = errors.New("invalid command")

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, or -1 if a signal ended it.
	Code int
	// Signal is the signal that ended it, 0 if it exited.
	Signal syscall.Signal
	// Text says it as os.ProcessState does: "exit status 3", "signal: killed".
	Text string
}

// String returns e.Text.
func (e Exit) String() string { return e.Text }

// Runner starts processes. Create it with NewRunner; Close it once every
// process it started is gone.
type Runner struct {
	self   string
	podEnv string
	sp     *spawner
}

// NewRunner returns a Runner. A command whose first word is self runs this
// program's own binary (os.Executable) with the rest as its arguments; any
// other first word is looked up in PATH. Each process gets the environment
// variable podEnv set to the name it is started for.
func NewRunner(self, podEnv string) *Runner {
	return &Runner{self: self, podEnv: podEnv, sp: newSpawner()}
}

// Start starts command for name, with stdout and stderr to out (nil:
// /dev/null), in a process group of its own, and returns its pid and a
// function that waits until it has ended, kills what it left in its
// process group, and says how it ended. An error wrapping ErrInvalidCommand
// means no retry can start it. Not after Close.
func (r *Runner) Start(name string, command []string, out *os.File) (pid int, wait func() Exit, err error) {
	if len(command) == 0 {
		return 0, nil, fmt.Errorf("%w: empty command", ErrInvalidCommand)
	}
	var path string
	if command[0] == r.self {
		path, err = os.Executable()
	} else {
		path, err = exec.LookPath(command[0])
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	cmd := exec.Command(path, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = append(os.Environ(), r.podEnv+"="+name)
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := r.sp.start(cmd); err != nil {
		if isNotRunnable(err) {
			return 0, nil, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
		}
		return 0, nil, fmt.Errorf("start %s: %w", name, err)
	}
	pid = cmd.Process.Pid
	return pid, func() Exit {
		err := cmd.Wait()
		Signal(pid, true) // whatever it left behind in its process group
		return describeExit(err)
	}, nil
}

// Close releases the runner's thread, once every process it started is gone.
func (r *Runner) Close() { r.sp.close() }

// isNotRunnable reports whether a start failed because of the command
// itself, which no retry fixes.
func isNotRunnable(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC)
}

// describeExit says how a process ended.
func describeExit(err error) Exit {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return Exit{Text: "exit status 0"}
	case errors.As(err, &ee):
		e := Exit{Code: ee.ExitCode(), Text: ee.ProcessState.String()}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		}
		return e
	}
	return Exit{Code: -1, Text: err.Error()}
}

// Signal sends SIGTERM, or SIGKILL if kill, to the process group led by
// pid.
func Signal(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}
