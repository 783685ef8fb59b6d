package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// killOne kills a web process with SIGKILL and waits for the node agent to
// notice and start a new one for the same pod.
func (d *demo) killOne() error {
	pods, err := d.pods("web")
	if err != nil || len(pods) == 0 {
		return fmt.Errorf("no web pods to kill (%v)", err)
	}
	victim := pods[0]
	pid := victim.Status.PID
	d.logf("kill -9", "pid %d (pod %s)", pid, victim.Name)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	var now podView
	var seenAt time.Time
	err = d.waitFor(5*time.Second, func() (bool, string, error) {
		pods, err := d.pods("web")
		i := slices.IndexFunc(pods, func(p podView) bool { return p.Name == victim.Name })
		if err != nil || i < 0 {
			return false, "pod " + victim.Name + " not found", err
		}
		now, seenAt = pods[i], time.Now()
		st := now.Status
		seen := fmt.Sprintf("%s: %s, pid %d, restarts %d", now.Name, st.Phase, st.PID, st.RestartCount)
		return now.Ready() && st.PID != pid && alive(st.PID), seen, nil
	})
	if err != nil {
		return err
	}
	d.rep.KillToRestart = now.Status.StartedAt.Sub(killed)
	d.rep.KillToStatus = seenAt.Sub(killed)
	d.logf("ok", "%s: restarted as pid %d (restarts: %d, last exit: %s): new process %v after the kill, in the pod's status after %v",
		now.Name, now.Status.PID, now.Status.RestartCount, now.Status.LastExit, round(d.rep.KillToRestart), round(d.rep.KillToStatus))
	return nil
}

// deleteOne deletes a web Pod object and waits for the ReplicaSet
// controller to create a replacement, and the node agent to run it.
func (d *demo) deleteOne() error {
	before, err := d.pods("web")
	if err != nil || len(before) == 0 {
		return fmt.Errorf("no web pods to delete (%v)", err)
	}
	victim := before[len(before)-1]
	deleted := time.Now()
	if _, err := d.st.pods.Delete(d.ctx, victim.Name, 0); err != nil {
		return err
	}
	d.logf("delete", "pod %s (pid %d)", victim.Name, victim.Status.PID)
	var repl podView
	err = d.waitFor(5*time.Second, func() (bool, string, error) {
		ok, seen, pods, err := d.ready("web", len(before), 0)
		for _, p := range pods {
			if !slices.ContainsFunc(before, func(b podView) bool { return b.Name == p.Name }) {
				repl = p
			}
		}
		if alive(victim.Status.PID) {
			ok, seen = false, seen+fmt.Sprintf("; pid %d of %s still runs", victim.Status.PID, victim.Name)
		}
		return ok && repl.Name != "", seen, err
	})
	if err != nil {
		return err
	}
	d.rep.DeleteToReplacement = time.Since(deleted)
	d.logf("ok", "new pod %s running as pid %d, %v after the delete; pid %d stopped",
		repl.Name, repl.Status.PID, round(d.rep.DeleteToReplacement), victim.Status.PID)
	return nil
}

// crashLoop applies a ReplicaSet whose process exits after crashAfter, and
// follows its back-off until it reaches the cap.
func (d *demo) crashLoop(name string, command []string, crashAfter time.Duration) error {
	if err := apply(d.ctx, d.st.replicaSets, name, ReplicaSetSpec{Replicas: 1, Command: command}); err != nil {
		return err
	}
	d.logf("apply", "%s: 1 replica of %q", name, strings.Join(command, " "))
	// Time enough for every back-off up to the cap, and the runs between.
	timeout := 10 * time.Second
	for b := d.cfg.backoffBase; ; b *= 2 {
		timeout += 2 * (min(b, d.cfg.backoffCap) + crashAfter)
		if b >= d.cfg.backoffCap {
			break
		}
	}
	shown := map[string]bool{}
	err := d.waitFor(timeout, func() (bool, string, error) {
		pods, err := d.pods(name)
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods)), err
		}
		p := pods[0]
		st := p.Status
		seen := fmt.Sprintf("%s: %s %s, restarts %d, back-off %q", p.Name, st.Phase, st.Reason, st.RestartCount, st.BackOff)
		switch key := fmt.Sprint(st.Phase, st.RestartCount); {
		case shown[key]:
		case st.Phase == PhaseRunning && st.RestartCount == 1:
			shown[key] = true
			d.logf("", "%s: %s, restarted at once as pid %d (restarts: 1)", p.Name, st.LastExit, st.PID)
		case st.Phase == PhaseWaiting && st.Reason == ReasonCrashLoopBackOff:
			shown[key] = true
			d.rep.BackOffs = append(d.rep.BackOffs, st.BackOff)
			d.logf("", "%s: %s, CrashLoopBackOff: restart in %s (restarts: %d)", p.Name, st.LastExit, st.BackOff, st.RestartCount)
			b, err := time.ParseDuration(st.BackOff)
			return b >= d.cfg.backoffCap, seen, err
		}
		return false, seen, nil
	})
	if err != nil {
		return err
	}
	// Each back-off is the one before doubled, up to the cap. (A step that
	// the polling missed on a very busy machine leaves a larger gap.)
	want := d.cfg.backoffBase
	for _, s := range d.rep.BackOffs {
		got, _ := time.ParseDuration(s)
		for want < got && want < d.cfg.backoffCap {
			want = min(2*want, d.cfg.backoffCap)
		}
		if got != want {
			return fmt.Errorf("back-off did not double from %v up to %v: %v", d.cfg.backoffBase, d.cfg.backoffCap, d.rep.BackOffs)
		}
		want = min(2*want, d.cfg.backoffCap)
	}
	cond, err := d.condition(name, CondReplicaFailure, ReasonCrashLoopBackOff)
	if err != nil {
		return err
	}
	d.logf("ok", "back-off grew %s (the cap); %s: %s=%s %s: %s",
		strings.Join(d.rep.BackOffs, " → "), name, cond.Type, cond.Status, cond.Reason, cond.Message)
	return nil
}

// condition waits until ReplicaSet name has a True condition of type t
// with the reason.
func (d *demo) condition(name, t, reason string) (object.Condition, error) {
	var c object.Condition
	err := d.waitFor(10*time.Second, func() (bool, string, error) {
		rs, _, ok, err := d.st.replicaSets.Get(d.ctx, name)
		if err != nil || !ok {
			return false, name + " not found", err
		}
		var found bool
		c, found = object.FindCondition(rs.Status.Conditions, t)
		return found && c.Status == object.ConditionTrue && c.Reason == reason, fmt.Sprintf("%s conditions: %+v", name, rs.Status.Conditions), nil
	})
	return c, err
}

// invalidCommand applies a ReplicaSet whose command does not exist, and
// waits for the condition that says so.
func (d *demo) invalidCommand() error {
	command := []string{"no-such-command", "--flag"}
	if err := apply(d.ctx, d.st.replicaSets, "broken", ReplicaSetSpec{Replicas: 1, Command: command}); err != nil {
		return err
	}
	d.logf("apply", "broken: 1 replica of %q", strings.Join(command, " "))
	cond, err := d.condition("broken", CondReplicaFailure, ReasonInvalidCommand)
	if err != nil {
		return err
	}
	d.logf("ok", "broken: %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
	return nil
}

// deleteAll requests the deletion of every ReplicaSet and waits until they,
// their pods and their processes are gone: the controller's finalizer keeps
// each ReplicaSet until it has deleted its pods.
func (d *demo) deleteAll() error {
	names := []string{"web", "crashy", "broken"}
	for _, n := range names {
		if _, _, err := informer.RequestDelete(d.ctx, d.st.replicaSets, n); err != nil {
			return err
		}
	}
	d.logf("delete", "replicasets %s", strings.Join(names, ", "))
	err := d.waitFor(10*time.Second, func() (bool, string, error) {
		rss, _, err := d.st.replicaSets.List(d.ctx)
		if err != nil {
			return false, "", err
		}
		pods, err := d.pods("")
		var running []int
		for pid := range d.pids {
			if alive(pid) {
				running = append(running, pid)
			}
		}
		return len(rss) == 0 && len(pods) == 0 && len(running) == 0,
			fmt.Sprintf("%d replicasets, %d pods, running pids %v", len(rss), len(pods), running), err
	})
	if err != nil {
		return err
	}
	d.logf("ok", "replicasets and pods deleted; none of the %d processes seen is running", len(d.pids))
	return nil
}

// round shortens a duration for the timeline.
func round(d time.Duration) time.Duration {
	if d < 100*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
