package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/converge-go/converge/object"
)

// demoReport is what the demo observed: the timeline's facts, for --report.
type demoReport struct {
	OK    bool         `json:"ok"`
	Steps []stepResult `json:"steps"`
	// KillToRestart is from the kill -9 to the start of the new process;
	// KillToStatus to the moment the pod's status showed it.
	KillToRestart time.Duration `json:"killToRestartNanos"`
	KillToStatus  time.Duration `json:"killToStatusNanos"`
	// DeleteToReplacement is from deleting a pod to its replacement's
	// process running, as its status shows.
	DeleteToReplacement time.Duration `json:"deleteToReplacementNanos"`
	// BackOffs are the crash-looping pod's restart delays, in order.
	BackOffs []string `json:"backOffs"`
	// PIDs are all the processes the demo saw; Leftovers those still
	// running at the end (none, or the demo failed).
	PIDs      []int  `json:"pids"`
	Leftovers []int  `json:"leftovers"`
	Error     string `json:"error,omitempty"`
}

type stepResult struct {
	Name string        `json:"name"`
	OK   bool          `json:"ok"`
	At   time.Duration `json:"atNanos"`
}

// demo is the scripted walk through the scene: it writes desired state to
// the store, as a user would, and reads the status the controllers write.
type demo struct {
	ctx   context.Context
	st    *stores
	cfg   config
	out   io.Writer
	start time.Time
	rep   demoReport
	pids  map[int]bool
}

// runDemo runs the Manager, walks through the steps, stops everything, and
// checks that no process is left.
func runDemo(ctx context.Context, sys *system, cfg config, out io.Writer) error {
	d := &demo{ctx: ctx, st: sys.stores, cfg: cfg, out: out, start: time.Now(), pids: make(map[int]bool)}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- sys.mgr.Run(mctx) }()

	d.logf("start", "desired state in %s; node agent %q; CrashLoopBackOff %v doubling to %v",
		sys.stores.describe, cfg.node, cfg.backoffBase, cfg.backoffCap)
	err := d.script()
	if err == nil {
		d.logf("stop", "stopping the controllers")
	}
	stop()
	err = errors.Join(err, <-mgrDone)
	sys.agent.shutdown()
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
	if cfg.report != "" {
		b, _ := json.MarshalIndent(d.rep, "", "  ")
		err = errors.Join(err, os.WriteFile(cfg.report, b, 0o644))
	}
	return err
}

func (d *demo) script() error {
	worker := []string{selfCommand, "worker"}
	crashAfter := 100 * time.Millisecond
	crasher := []string{selfCommand, "worker", "--crash-after", crashAfter.String(), "--exit-code", "3"}
	for _, s := range []struct {
		name string
		run  func() error
	}{
		{"apply 3 replicas", func() error { return d.scale("web", 3, worker, 1) }},
		{"kill -9 a process", d.killOne},
		{"delete a pod", d.deleteOne},
		{"scale to 5", func() error { return d.scale("web", 5, worker, 2) }},
		{"scale to 2", func() error { return d.scale("web", 2, worker, 3) }},
		{"crash loop", func() error { return d.crashLoop("crashy", crasher, crashAfter) }},
		{"invalid command", d.invalidCommand},
		{"delete the replicasets", d.deleteAll},
	} {
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
	fmt.Fprintf(d.out, "[%5.2fs] %-7s %s\n", time.Since(d.start).Seconds(), verb, fmt.Sprintf(format, args...))
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
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// pods returns owner's pods (all pods if owner is ""), noting their PIDs.
func (d *demo) pods(owner string) ([]podView, error) {
	pods, err := listPods(d.ctx, d.st, owner)
	for _, p := range pods {
		if p.Status.PID > 0 {
			d.pids[p.Status.PID] = true
		}
	}
	return pods, err
}

// scale applies name with n replicas of command and waits until the
// controller has observed generation gen and n processes run.
func (d *demo) scale(name string, n int, command []string, gen int64) error {
	before, err := d.pods(name)
	if err != nil {
		return err
	}
	if err := apply(d.ctx, d.st.replicaSets, name, ReplicaSetSpec{Replicas: n, Command: command}); err != nil {
		return err
	}
	d.logf("apply", "%s: %d replicas of %q", name, n, strings.Join(command, " "))
	var pods []podView
	err = d.waitFor(10*time.Second, func() (bool, string, error) {
		var ok bool
		var seen string
		ok, seen, pods, err = d.ready(name, n, gen)
		return ok, seen, err
	})
	if err != nil {
		return err
	}
	var stopped []string
	for _, p := range before {
		if !slices.ContainsFunc(pods, func(q podView) bool { return q.Name == p.Name }) {
			if err := d.waitFor(5*time.Second, func() (bool, string, error) {
				return !alive(p.Status.PID), fmt.Sprintf("pid %d of deleted pod %s still runs", p.Status.PID, p.Name), nil
			}); err != nil {
				return err
			}
			stopped = append(stopped, fmt.Sprint(p.Status.PID))
		}
	}
	msg := fmt.Sprintf("%s: %d/%d ready, generation %d observed: %s", name, n, n, gen, describePIDs(pods))
	if len(stopped) > 0 {
		msg += "; stopped pids " + strings.Join(stopped, ", ")
	}
	d.logf("ok", "%s", msg)
	return nil
}

// ready reports whether name's status says n of n ready at generation gen
// or later, and n pods run live processes.
func (d *demo) ready(name string, n int, gen int64) (bool, string, []podView, error) {
	rs, _, ok, err := d.st.replicaSets.Get(d.ctx, name)
	if err != nil || !ok {
		return false, name + " not found", nil, err
	}
	pods, err := d.pods(name)
	running := 0
	for _, p := range pods {
		if p.Ready() && alive(p.Status.PID) {
			running++
		}
	}
	s := rs.Status
	seen := fmt.Sprintf("%s: observed generation %d of %d, status %d/%d ready, %d pods of which %d running",
		name, s.ObservedGeneration, rs.Generation, s.ReadyReplicas, rs.Spec.Replicas, len(pods), running)
	if c, ok := object.FindCondition(s.Conditions, CondReplicaFailure); ok && c.Status == object.ConditionTrue {
		seen += fmt.Sprintf("; %s %s: %s", c.Type, c.Reason, c.Message)
	}
	done := s.ObservedGeneration >= gen && s.Replicas == n && s.ReadyReplicas == n && len(pods) == n && running == n
	return done, seen, pods, err
}

func describePIDs(pods []podView) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s (pid %d)", p.Name, p.Status.PID))
	}
	return strings.Join(parts, ", ")
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
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
