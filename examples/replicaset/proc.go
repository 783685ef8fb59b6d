package main

import (
	"os"

	osproc "github.com/converge-go/converge/examples/internal/proc"
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

// osRunner runs each pod's command as an OS process (package examples/internal/proc), with
// stdout and stderr to output (nil: /dev/null).
type osRunner struct {
	output *os.File
	r      *osproc.Runner
}

// selfCommand is the first word of a command that runs this program's own
// binary, as in ["replicaset", "worker", "--crash-after", "1s"].
const selfCommand = "replicaset"

// podEnv names the environment variable that tells a worker its pod.
const podEnv = "REPLICASET_POD"

func newOSRunner(output *os.File) *osRunner {
	return &osRunner{output: output, r: osproc.NewRunner(selfCommand, podEnv)}
}

func (r *osRunner) start(pod string, command []string) (int, func() string, error) {
	pid, wait, err := r.r.Start(pod, command, r.output)
	if err != nil {
		return 0, nil, err
	}
	return pid, func() string { return wait().String() }, nil
}

func (r *osRunner) signal(pid int, kill bool) { osproc.Signal(pid, kill) }
func (r *osRunner) close()                    { r.r.Close() }

// worker is the program the pods run by default (osproc.Worker).
func worker(args []string) int { return osproc.Worker(args, podEnv) }
