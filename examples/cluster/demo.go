package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	osproc "github.com/converge-go/converge/examples/internal/proc"
	"github.com/converge-go/converge/informer/httpstore"
)

// demoReport is what the demo observed, for --report.
type demoReport struct {
	OK      bool         `json:"ok"`
	Timings string       `json:"timings"`
	Steps   []stepResult `json:"steps"`
	// PodStart is from creating a pod bound to a node to its status
	// saying Running with a PID.
	PodStart time.Duration `json:"podStartNanos"`
	// KillToRestart is from a container's kill -9 to its new process in
	// the pod's status.
	KillToRestart time.Duration `json:"killToRestartNanos"`
	// BackOffs are a crash-looping container's restart delays, in order.
	BackOffs []string `json:"backOffs"`
	// AgentKillToChildrenGone is from an agent's kill -9 to the last of
	// its containers' processes gone.
	AgentKillToChildrenGone time.Duration `json:"agentKillToChildrenGoneNanos"`
	// PIDs are every container process the demo saw; Leftovers those still
	// running at the end (none, or the demo failed).
	// Deploy is the Deployment's start, from the apply.
	Deploy *DeployTimes `json:"deploy,omitempty"`
	// NodeDeath is a node's death, from its agent's kill -9.
	NodeDeath *NodeDeathTimes `json:"nodeDeath,omitempty"`
	// Rollout is a rolling update's time and the bounds it kept.
	Rollout *RolloutFigures `json:"rollout,omitempty"`
	// Broken is a rollout that never becomes available.
	Broken *BrokenRolloutFigures `json:"broken,omitempty"`
	// Undo is `rollout undo`'s.
	Undo *UndoFigures `json:"undo,omitempty"`
	// Herd is the thundering herd's: many pods, two nodes lost at once.
	Herd *HerdFigures `json:"herd,omitempty"`
	// Background and Orphan are those deletes'.
	Background *CascadeFigures `json:"background,omitempty"`
	Orphan     *CascadeFigures `json:"orphan,omitempty"`
	// Delete is a foreground delete's.
	Delete    *DeleteFigures `json:"delete,omitempty"`
	PIDs      []int          `json:"pids"`
	Leftovers []int          `json:"leftovers"`
	Error     string         `json:"error,omitempty"`
}

type stepResult struct {
	Name string        `json:"name"`
	OK   bool          `json:"ok"`
	At   time.Duration `json:"atNanos"`
}

// demo is the scripted scene: a control plane in this process, agents as
// child processes, and a user who writes through the API as `cluster ctl`
// does and reads the status the agents write.
type demo struct {
	ctx     context.Context
	st      api.Stores
	url     string
	timings api.Timings
	out     io.Writer
	start   time.Time
	rep     demoReport
	pids    map[int]bool
	agents  map[string]*exec.Cmd
	// children starts the agents, so that they die with the demo.
	children *osproc.Children
	logDir   string
}

func demoMode(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("demo", flag.ContinueOnError)
	fl.SetOutput(stderr)
	timings := fl.String("timings", "fast", "fast or kube")
	store := fl.String("store", "mem", "as up's --store")
	report := fl.String("report", "", "also write what was observed, as JSON, to this file")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runDemo(ctx, *store, *timings, *report, stdout); err != nil {
		fmt.Fprintf(stderr, "cluster demo: %v\n", err)
		return 1
	}
	return 0
}

// runDemo starts the control plane, walks through the steps, stops
// everything and checks that no process is left.
func runDemo(ctx context.Context, store, timingsName, report string, out io.Writer) error {
	timings, err := parseTimings(timingsName)
	if err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "cluster-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(logDir)
	d := &demo{ctx: ctx, timings: timings, out: out, start: time.Now(), pids: map[int]bool{},
		agents: map[string]*exec.Cmd{}, children: osproc.NewChildren(), logDir: logDir, rep: demoReport{Timings: timingsName}}
	defer d.children.Close() // after the agents have been waited for, below

	upCtx, stopUp := context.WithCancel(ctx)
	defer stopUp()
	urls := make(chan string, 1)
	upDone := make(chan error, 1)
	go func() {
		upDone <- up(upCtx, upConfig{store: store, timings: timingsName, listen: "127.0.0.1:0", managerAddr: "off",
			logLevel: "none", onListen: func(u string) { urls <- u }}, io.Discard, io.Discard)
	}()
	select {
	case d.url = <-urls:
	case err := <-upDone:
		return fmt.Errorf("the control plane did not start: %w", err)
	}
	d.st, err = apiserver.NewStores(d.url, "", httpstore.ClientOptions{})
	if err == nil {
		d.logf("start", "control plane on %s, %d controllers, %s timings (lease every %v, crash back-off %v doubling to %v)",
			d.url, len(controllers), timingsName, timings.LeaseRenewInterval, timings.CrashBackOff, timings.CrashBackOffMax)
		err = d.script()
	}
	for _, a := range d.agents {
		_ = a.Process.Signal(syscall.SIGTERM)
		_ = a.Wait()
	}
	stopUp()
	err = errors.Join(err, <-upDone)
	d.rep.Leftovers = []int{}
	for pid := range d.pids {
		d.rep.PIDs = append(d.rep.PIDs, pid)
		if alive(pid) {
			d.rep.Leftovers = append(d.rep.Leftovers, pid)
		}
	}
	slices.Sort(d.rep.PIDs)
	if len(d.rep.Leftovers) > 0 {
		err = errors.Join(err, fmt.Errorf("processes still running after the demo: %v", d.rep.Leftovers))
	}
	if err == nil {
		d.logf("done", "every step observed; all %d processes the demo saw are gone", len(d.rep.PIDs))
	} else {
		d.logf("FAIL", "%v", err)
		d.rep.Error = err.Error()
	}
	d.rep.OK = err == nil
	if report != "" {
		b, _ := json.MarshalIndent(d.rep, "", "  ")
		err = errors.Join(err, os.WriteFile(report, b, 0o644))
	}
	return err
}

// step is one scene of the demo.
type step struct {
	name string
	run  func() error
}

// script runs the steps in order, stopping at the first that fails. The
// controllers' steps follow the node agent's own, once the pods bound by
// hand are gone.
func (d *demo) script() error {
	steps := []step{
		{"3 nodes join", d.nodesJoin},
		{"run a pod", d.runPod},
		{"kill -9 a container", d.killContainer},
		{"crash loop", d.crashLoop},
		{"kill -9 an agent", d.killAgent},
		{"the agent comes back", d.agentBack},
		{"delete the pods", d.deletePods},
		{"a Deployment of 6", d.applyDeployment},
		{"a node dies", d.nodeDeath},
		{"a rolling update", d.rollingUpdate},
		{"a broken rollout", d.brokenRollout},
		{"rollout undo", d.rolloutUndo},
		{"a thundering herd", d.thunderingHerd},
		{"a background delete", func() error { return d.backgroundDelete(herdName) }},
		{"an orphan delete", d.orphanScene},
		{"a foreground delete", d.foregroundDelete},
	}
	for _, s := range steps {
		err := s.run()
		d.rep.Steps = append(d.rep.Steps, stepResult{Name: s.name, OK: err == nil, At: time.Since(d.start)})
		if err != nil {
			return fmt.Errorf("step %q: %w", s.name, err)
		}
	}
	return nil
}

// logf prints one line of the timeline: elapsed time, a verb, the rest.
func (d *demo) logf(verb, format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.2fs] %-7s %s\n", time.Since(d.start).Seconds(), verb, fmt.Sprintf(format, args...))
}

// waitFor polls cond until it reports done, or fails after timeout with
// what cond saw last.
func (d *demo) waitFor(timeout time.Duration, cond func() (done bool, seen string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, seen, err := cond()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not observed within %v; last seen: %s", timeout, seen)
		}
		select {
		case <-d.ctx.Done():
			return fmt.Errorf("interrupted; last seen: %s", seen)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// startAgent starts node's agent as a child process of this binary, one
// that dies with the demo even if the demo is killed by SIGKILL (on Linux).
func (d *demo) startAgent(node, cpu, memory string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	timings := d.rep.Timings
	cmd := exec.Command(self, "agent", "--node", node, "--cpu", cpu, "--memory", memory, "--api", d.url,
		"--timings", timings, "--log-dir", d.logDir, "--log-level", "none")
	if err := d.children.Start(cmd); err != nil {
		return err
	}
	d.agents[node] = cmd
	return nil
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		_, noProc := os.Stat("/proc/self")
		return noProc != nil // gone, unless this system has no /proc
	}
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}
