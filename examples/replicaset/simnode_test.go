package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// simNode is the machine the pods run on in the simulation (sim_test.go):
// its processes exist only here, in the run's virtual time, so that the
// agent's code runs unchanged under the kit without starting OS processes.
// It outlives the agent's incarnations, as a machine outlives the agent
// process; a crashed agent's processes die with it (the parent-death signal
// of the real runner).
//
// Commands: ["sim", ...] runs until stopped; ["sim", "exit-once", D]
// exits with status 1 after D the first time it runs for a pod, then runs
// until stopped; any other first word cannot be started (exec's "not found").
type simNode struct {
	mu      sync.Mutex
	lastPID int
	// procs are the running processes, by pid; exited the pods whose
	// exit-once process has exited. Guarded by mu.
	procs  map[int]*simProc
	exited map[string]bool
}

type simProc struct {
	pod  string
	done chan struct{}
	exit string // set before done is closed
	stop *time.Timer
}

func newSimNode() *simNode {
	return &simNode{procs: map[int]*simProc{}, exited: map[string]bool{}}
}

// running returns the pod of each running process, by pid.
func (n *simNode) running() map[int]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[int]string, len(n.procs))
	for pid, p := range n.procs {
		out[pid] = p.pod
	}
	return out
}

// end ends process pid, if it runs, with exit.
func (n *simNode) end(pid int, exit string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.procs[pid]
	if !ok {
		return
	}
	delete(n.procs, pid)
	if p.stop != nil {
		p.stop.Stop()
	}
	p.exit = exit
	close(p.done)
}

// runner returns the runner of one incarnation of the agent.
func (n *simNode) runner() *simRunner { return &simRunner{node: n, mine: map[int]bool{}} }

// simRunner starts processes on a simNode for one agent; close kills those
// still running, as the parent-death signal would.
type simRunner struct {
	node *simNode
	mu   sync.Mutex
	mine map[int]bool // pids this runner started; guarded by mu
}

func (r *simRunner) start(pod string, command []string) (int, func() string, error) {
	if command[0] != "sim" {
		return 0, nil, fmt.Errorf("%w: exec: %q: executable file not found in $PATH", errInvalidCommand, command[0])
	}
	n := r.node
	n.mu.Lock()
	n.lastPID++
	pid := n.lastPID
	p := &simProc{pod: pod, done: make(chan struct{})}
	n.procs[pid] = p
	if len(command) == 3 && command[1] == "exit-once" && !n.exited[pod] {
		d, err := time.ParseDuration(command[2])
		if err != nil {
			delete(n.procs, pid)
			n.mu.Unlock()
			return 0, nil, fmt.Errorf("%w: %s: %w", errInvalidCommand, strings.Join(command, " "), err)
		}
		n.exited[pod] = true
		p.stop = time.AfterFunc(d, func() { n.end(pid, "exit status 1") })
	}
	n.mu.Unlock()
	r.mu.Lock()
	r.mine[pid] = true
	r.mu.Unlock()
	return pid, func() string { <-p.done; return p.exit }, nil
}

func (r *simRunner) signal(pid int, kill bool) {
	r.node.end(pid, map[bool]string{false: "signal: terminated", true: "signal: killed"}[kill])
}

func (r *simRunner) close() {
	r.mu.Lock()
	pids := make([]int, 0, len(r.mine))
	for pid := range r.mine {
		pids = append(pids, pid)
	}
	r.mu.Unlock()
	slices.Sort(pids)
	for _, pid := range pids {
		r.node.end(pid, "signal: killed")
	}
}
