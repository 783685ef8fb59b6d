package agent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// readiness is a container's readiness, set by its probe's goroutine.
type readiness struct{ v atomic.Bool }

func (r *readiness) set(v bool) bool { return r.v.Swap(v) != v }
func (r *readiness) get() bool       { return r.v.Load() }

// probe runs a readiness probe's command every PeriodSeconds (default 10)
// after InitialDelaySeconds, until ctx is done, and wakes the pod's
// reconcile when the result changes. A command that exits 0 within a
// second (kubelet's default timeoutSeconds) is a success.
func (k *kubelet) probe(ctx context.Context, key string, p api.Probe, r *readiness) {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	delay := time.Duration(p.InitialDelaySeconds) * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.cfg.Clock.After(delay):
		}
		delay = period
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := exec.CommandContext(pctx, p.Exec.Command[0], p.Exec.Command[1:]...).Run()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if r.set(err == nil) {
			k.notify(key)
		}
	}
}

// report writes the pod's status from what the agent knows, unless it is
// unchanged, the pod is gone or it is no longer this node's. The other
// writers' conditions (PodScheduled) are kept.
func (k *kubelet) report(ctx context.Context, key string, pod *api.Pod, ps *podState) error {
	now := k.cfg.Clock.Now().UTC()
	statuses := make([]api.ContainerStatus, 0, len(pod.Spec.Containers))
	allReady := true
	for _, c := range pod.Spec.Containers {
		cs := ps.containers[c.Name]
		st := containerStatus(pod, c.Name, cs)
		allReady = allReady && st.Ready
		statuses = append(statuses, st)
	}
	phase := podPhase(statuses)
	ready := object.Condition{Type: api.PodReady, Status: object.ConditionTrue}
	if !allReady || phase != api.PodRunning {
		ready = object.Condition{Type: api.PodReady, Status: object.ConditionFalse, Reason: "ContainersNotReady",
			Message: "containers with unready status"}
	}
	_, _, err := informer.Update(ctx, k.cfg.Stores.Pods, key, func(p *api.Pod) error {
		if p.Spec.NodeName != k.cfg.Node || p.UID != ps.uid {
			return nil
		}
		p.Status.Phase = phase
		if p.Status.StartTime.IsZero() {
			p.Status.StartTime = ps.startTime
		}
		p.Status.ContainerStatuses = statuses
		conds := append([]object.Condition(nil), p.Status.Conditions...)
		object.SetCondition(&conds, ready, now)
		p.Status.Conditions = conds
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return nil
	}
	return err
}

// containerStatus is what the pod's status says of one container.
func containerStatus(pod *api.Pod, name string, cs *ctrState) api.ContainerStatus {
	st := api.ContainerStatus{Name: name, RestartCount: max(cs.starts-1, 0)}
	if cs.lastTerm != nil {
		t := *cs.lastTerm
		st.LastState = api.ContainerState{Terminated: &t}
	}
	switch {
	case cs.cur != nil:
		st.State = api.ContainerState{Running: &api.ContainerStateRunning{StartedAt: cs.cur.startedAt.UTC()}}
		st.PID = cs.cur.pid
		st.Ready = cs.ready.get()
	case cs.finished:
		t := *cs.lastTerm
		st.State = api.ContainerState{Terminated: &t}
		st.LastState = api.ContainerState{}
	case cs.lastTerm != nil:
		st.State = api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: api.ReasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %v restarting failed container=%s pod=%s", cs.delay, name, podRef(pod))}}
	default:
		st.State = api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: "ContainerCreating"}}
	}
	return st
}

// podPhase is kubelet's getPhase (pkg/kubelet/kubelet_pods.go): Pending
// while a container has not started yet; Running while one runs, or all
// stopped but restart; Succeeded or Failed once all stopped for good.
func podPhase(statuses []api.ContainerStatus) string {
	var running, waiting, restarting, failed, succeeded int
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case s.State.Waiting != nil && s.LastState.Terminated != nil:
			restarting++ // stopped, and to be restarted: the pod still runs
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return api.PodPending
	case running > 0 || restarting > 0:
		return api.PodRunning
	case failed > 0:
		return api.PodFailed
	case succeeded > 0:
		return api.PodSucceeded
	}
	return api.PodPending
}
