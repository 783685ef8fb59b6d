package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// runner runs the pods' processes for the agent: osRunner runs OS
// processes; the simulation test's runner, processes that exist only in its
// simulated world, so that the controllers run under the simulation kit.
type runner interface {
	// start starts command for pod, and returns its pid and a function that
	// waits until it has ended and says how ("exit status 3"). An error
	// wrapping errInvalidCommand means no retry can start it.
	start(pod string, command []string) (pid int, wait func() string, err error)
	// signal sends SIGTERM, or SIGKILL if kill, to the process pid and
	// everything it started.
	signal(pid int, kill bool)
	// close releases the runner, once every process it started is gone.
	close()
}

// osRunner runs each pod's command as an OS process (podCommand), started
// by its spawner, with stdout and stderr to output (nil: /dev/null).
type osRunner struct {
	output *os.File
	sp     *spawner
}

func newOSRunner(output *os.File) *osRunner { return &osRunner{output: output, sp: newSpawner()} }

func (r *osRunner) start(pod string, command []string) (int, func() string, error) {
	cmd, err := podCommand(pod, command, r.output)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errInvalidCommand, err)
	}
	if err := r.sp.start(cmd); err != nil {
		if isNotRunnable(err) {
			return 0, nil, fmt.Errorf("%w: %w", errInvalidCommand, err)
		}
		return 0, nil, fmt.Errorf("start %s: %w", pod, err)
	}
	pid := cmd.Process.Pid
	return pid, func() string {
		err := cmd.Wait()
		killGroup(pid) // whatever it left behind in its process group
		return describeExit(err)
	}, nil
}

func (r *osRunner) signal(pid int, kill bool) { signalGroup(pid, kill) }
func (r *osRunner) close()                    { r.sp.close() }

// selfCommand is the first word of a command that runs this program's own
// binary, as in ["replicaset", "worker", "--crash-after", "1s"].
const selfCommand = "replicaset"

// podCommand prepares a pod's process: in a process group of its own (so
// that the agent can signal everything it started, and a Ctrl-C in the
// terminal reaches the agent, not the pods), killed if the agent dies.
func podCommand(pod string, command []string, out *os.File) (*exec.Cmd, error) {
	var path string
	var err error
	if command[0] == selfCommand {
		path, err = os.Executable()
	} else {
		path, err = exec.LookPath(command[0])
	}
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = append(os.Environ(), "REPLICASET_POD="+pod)
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.SysProcAttr = sysProcAttr()
	return cmd, nil
}

// isNotRunnable reports whether a start failed because of the command
// itself, which no retry fixes.
func isNotRunnable(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC)
}

// describeExit says how a process ended: "exit status 3", "signal: killed".
func describeExit(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	}
	return err.Error()
}

// signalGroup sends SIGTERM, or SIGKILL if kill, to the process group
// led by pid.
func signalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}

// killGroup kills what is left of the process group led by pid.
func killGroup(pid int) { signalGroup(pid, true) }

// worker is the program the pods run by default: it runs until SIGTERM,
// or exits with --exit-code after --crash-after.
func worker(args []string) int {
	fl := flag.NewFlagSet("worker", flag.ContinueOnError)
	crashAfter := fl.Duration("crash-after", 0, "exit after this long (0: run until stopped)")
	exitCode := fl.Int("exit-code", 1, "the exit status for --crash-after")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	pod := os.Getenv("REPLICASET_POD")
	fmt.Printf("worker %d (pod %s): running\n", os.Getpid(), pod)
	var crash <-chan time.Time
	if *crashAfter > 0 {
		crash = time.After(*crashAfter)
	}
	// Where the parent-death signal does not exist, notice the parent's
	// death by being adopted.
	parent := os.Getppid()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			fmt.Printf("worker %d (pod %s): %v, stopping\n", os.Getpid(), pod, s)
			return 0
		case <-crash:
			fmt.Printf("worker %d (pod %s): crashing with exit status %d\n", os.Getpid(), pod, *exitCode)
			return *exitCode
		case <-tick.C:
			if os.Getppid() != parent {
				return 1
			}
		}
	}
}
