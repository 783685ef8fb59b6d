package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// The demo's nodes.
var demoNodes = []string{"n1", "n2", "n3"}

// nodesJoin starts an agent per node and waits until each node is Ready
// and its lease renewed.
func (d *demo) nodesJoin() error {
	for _, n := range demoNodes {
		if err := d.startAgent(n, "4", "8Gi"); err != nil {
			return err
		}
		d.logf("agent", "%s started (pid %d)", n, d.agents[n].Process.Pid)
	}
	return d.waitFor(20*time.Second, func() (bool, string, error) {
		var ready []string
		for _, n := range demoNodes {
			node, _, ok, err := d.st.Nodes.Get(d.ctx, n)
			if err != nil {
				return false, "", err
			}
			_, _, leased, err := d.st.Leases.Get(d.ctx, api.Key(api.NodeLeaseNamespace, n))
			if err != nil {
				return false, "", err
			}
			if ok && leased && object.IsTrue(node.Status.Conditions, api.NodeReady) {
				ready = append(ready, n)
			}
		}
		if len(ready) == len(demoNodes) {
			d.logf("ok", "nodes %s Ready, their leases in %s", strings.Join(ready, ", "), api.NodeLeaseNamespace)
			return true, "", nil
		}
		return false, fmt.Sprintf("ready: %v", ready), nil
	})
}

// demoPod is a pod bound by hand to node (no scheduler needed).
func demoPod(name, node string, command ...string) api.Pod {
	return api.Pod{Metadata: api.Metadata{Name: name, Namespace: api.DefaultNamespace, Labels: map[string]string{"demo": name}},
		Spec: api.PodSpec{NodeName: node, Containers: []api.Container{{Name: name, Command: command}}}}
}

// running waits until pod key runs a live process after at least
// restarts restarts, other than not, and returns its container status.
func (d *demo) running(key string, restarts int32, not int) (api.ContainerStatus, error) {
	var cs api.ContainerStatus
	err := d.waitFor(20*time.Second, func() (bool, string, error) {
		p, _, ok, err := d.st.Pods.Get(d.ctx, key)
		if err != nil || !ok || len(p.Status.ContainerStatuses) == 0 {
			return false, key + " has no status yet", err
		}
		cs = p.Status.ContainerStatuses[0]
		if cs.PID > 0 {
			d.pids[cs.PID] = true
		}
		done := p.Status.Phase == api.PodRunning && cs.State.Running != nil && cs.RestartCount >= restarts &&
			cs.PID != not && alive(cs.PID)
		return done, fmt.Sprintf("%s: %s, pid %d, %d restarts", key, p.Status.Phase, cs.PID, cs.RestartCount), nil
	})
	return cs, err
}

// runPod creates a pod bound to n1 and waits until it runs.
func (d *demo) runPod() error {
	t0 := time.Now()
	if _, err := d.st.Pods.Create(d.ctx, "default/web", demoPod("web", "n1", agent.SelfCommand, "worker")); err != nil {
		return err
	}
	d.logf("create", "pod default/web bound to n1: %s worker", agent.SelfCommand)
	cs, err := d.running("default/web", 0, 0)
	if err != nil {
		return err
	}
	d.rep.PodStart = time.Since(t0)
	d.logf("ok", "default/web Running on n1 as pid %d, %v after its creation", cs.PID, d.rep.PodStart.Round(time.Millisecond))
	return nil
}

// killContainer kills web's process and waits for the agent to restart
// it in place.
func (d *demo) killContainer() error {
	p, _, _, err := d.st.Pods.Get(d.ctx, "default/web")
	if err != nil {
		return err
	}
	old := p.Status.ContainerStatuses[0].PID
	t0 := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return err
	}
	d.logf("kill", "kill -9 %d (default/web's container)", old)
	cs, err := d.running("default/web", 1, old)
	if err != nil {
		return err
	}
	d.rep.KillToRestart = time.Since(t0)
	d.logf("ok", "restarted in place as pid %d, restartCount %d, last exit code %d, %v after the kill",
		cs.PID, cs.RestartCount, cs.LastState.Terminated.ExitCode, d.rep.KillToRestart.Round(time.Millisecond))
	return nil
}

// crashLoop runs a container that keeps crashing and watches its
// restart delay grow (CrashLoopBackOff).
func (d *demo) crashLoop() error {
	crasher := demoPod("crashy", "n2", agent.SelfCommand, "worker", "--crash-after", "100ms", "--exit-code", "3")
	if _, err := d.st.Pods.Create(d.ctx, "default/crashy", crasher); err != nil {
		return err
	}
	d.logf("create", "pod default/crashy on n2: exits with status 3 after 100ms")
	want := 3
	err := d.waitFor(time.Duration(want+2)*d.timings.CrashBackOff*8+20*time.Second, func() (bool, string, error) {
		p, _, ok, err := d.st.Pods.Get(d.ctx, "default/crashy")
		if err != nil || !ok || len(p.Status.ContainerStatuses) == 0 {
			return false, "no status yet", err
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.PID > 0 {
			d.pids[cs.PID] = true
		}
		if w := cs.State.Waiting; w != nil && w.Reason == api.ReasonCrashLoopBackOff {
			delay, _, _ := strings.Cut(strings.TrimPrefix(w.Message, "back-off "), " ")
			if n := len(d.rep.BackOffs); n == 0 || d.rep.BackOffs[n-1] != delay {
				d.rep.BackOffs = append(d.rep.BackOffs, delay)
				d.logf("status", "default/crashy %s: %s (restartCount %d)", w.Reason, w.Message, cs.RestartCount)
			}
		}
		return len(d.rep.BackOffs) >= want, fmt.Sprintf("back-offs %v", d.rep.BackOffs), nil
	})
	if err != nil {
		return err
	}
	prev := time.Duration(0)
	for _, s := range d.rep.BackOffs {
		b, err := time.ParseDuration(s)
		if err != nil || b <= prev {
			return fmt.Errorf("the back-offs %v do not grow", d.rep.BackOffs)
		}
		prev = b
	}
	d.logf("ok", "back-off grows: %s", strings.Join(d.rep.BackOffs, " → "))
	return nil
}

// killAgent runs a steady pod on n2, kills n2's agent and waits until
// the pod's process is gone and the lease has not been renewed for two
// renewal intervals.
func (d *demo) killAgent() error {
	if _, err := d.st.Pods.Create(d.ctx, "default/steady", demoPod("steady", "n2", agent.SelfCommand, "worker")); err != nil {
		return err
	}
	cs, err := d.running("default/steady", 0, 0)
	if err != nil {
		return err
	}
	d.logf("ok", "default/steady Running on n2 as pid %d", cs.PID)
	a := d.agents["n2"]
	t0 := time.Now()
	if err := a.Process.Kill(); err != nil {
		return err
	}
	_ = a.Wait()
	delete(d.agents, "n2")
	d.logf("kill", "kill -9 %d (n2's agent)", a.Process.Pid)
	if err := d.waitFor(10*time.Second, func() (bool, string, error) {
		return !alive(cs.PID), fmt.Sprintf("pid %d of n2 still runs", cs.PID), nil
	}); err != nil {
		return err
	}
	d.rep.AgentKillToChildrenGone = time.Since(t0)
	d.logf("ok", "n2's containers died with it, %v after the kill", d.rep.AgentKillToChildrenGone.Round(time.Millisecond))
	stale := 2 * d.timings.LeaseRenewInterval
	return d.waitFor(stale+10*time.Second, func() (bool, string, error) {
		l, _, _, err := d.st.Leases.Get(d.ctx, api.Key(api.NodeLeaseNamespace, "n2"))
		if err != nil {
			return false, "", err
		}
		age := time.Since(l.Spec.RenewTime)
		if age > stale {
			d.logf("ok", "n2's lease was last renewed %v ago: no longer renewed", age.Round(time.Millisecond))
			return true, "", nil
		}
		return false, fmt.Sprintf("n2's lease renewed %v ago", age), nil
	})
}

// agentBack restarts n2's agent: it renews its lease again and runs the
// pods still bound to it.
func (d *demo) agentBack() error {
	before, _, _, err := d.st.Leases.Get(d.ctx, api.Key(api.NodeLeaseNamespace, "n2"))
	if err != nil {
		return err
	}
	if err := d.startAgent("n2", "4", "8Gi"); err != nil {
		return err
	}
	d.logf("agent", "n2 restarted (pid %d)", d.agents["n2"].Process.Pid)
	return d.waitFor(20*time.Second, func() (bool, string, error) {
		l, _, _, err := d.st.Leases.Get(d.ctx, api.Key(api.NodeLeaseNamespace, "n2"))
		if err != nil {
			return false, "", err
		}
		p, _, _, err := d.st.Pods.Get(d.ctx, "default/steady")
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "", err
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.PID > 0 {
			d.pids[cs.PID] = true
		}
		renewed := l.Spec.RenewTime.After(before.Spec.RenewTime)
		if renewed && cs.PID > 0 && alive(cs.PID) {
			d.logf("ok", "n2 renews its lease again and runs the pods still bound to it: default/steady anew as pid %d", cs.PID)
			return true, "", nil
		}
		return false, fmt.Sprintf("lease renewed: %v; steady pid %d", renewed, cs.PID), nil
	})
}

// deletePods deletes the demo's pods and waits until their processes are
// gone.
func (d *demo) deletePods() error {
	for _, key := range []string{"default/web", "default/crashy", "default/steady"} {
		if _, err := d.st.Pods.Delete(d.ctx, key, 0); err != nil && !errors.Is(err, informer.ErrNotFound) {
			return err
		}
		d.logf("delete", "pod %s", key)
	}
	return d.waitFor(40*time.Second, func() (bool, string, error) {
		for pid := range d.pids {
			if alive(pid) {
				return false, fmt.Sprintf("pid %d still runs", pid), nil
			}
		}
		d.logf("ok", "the pods' processes are gone")
		return true, "", nil
	})
}
