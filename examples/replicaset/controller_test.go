package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// fixture is the two stores and their informers, on a reconciletest
// harness with a fake clock.
type fixture struct {
	h      *reconciletest.Harness
	rs     *memstore.Store[string, ReplicaSet]
	pods   *memstore.Store[string, Pod]
	st     *stores
	podInf *informer.Informer[string, Pod]
	rsInf  *informer.Informer[string, ReplicaSet]
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{h: reconciletest.New(t), rs: must.Do(memstore.New[string, ReplicaSet]()), pods: must.Do(memstore.New[string, Pod]())}
	f.st = &stores{replicaSets: f.rs, pods: f.pods}
	f.rsInf = reconciletest.Informer(f.h, "replicasets", f.rs)
	f.podInf = reconciletest.Informer(f.h, "pods", f.pods)
	return f
}

func (f *fixture) replicaSetController() *reconcile.Controller[string] {
	c := newRSController(f.rsInf, f.podInf, f.st, "local")
	c.now = f.h.Clock.Now
	return f.replicaSetControllerWith(c)
}

func (f *fixture) replicaSetControllerWith(c *rsController) *reconcile.Controller[string] {
	return reconciletest.Controller(f.h, "replicaset", c, reconcile.For(f.rsInf), reconcile.Owns(f.podInf, podOwner))
}

func (f *fixture) apply(t *testing.T, name string, replicas int, command ...string) {
	t.Helper()
	if len(command) == 0 {
		command = []string{"replicaset", "worker"}
	}
	err := apply(context.Background(), f.st.replicaSets, name, ReplicaSetSpec{Replicas: replicas, Command: command})
	require.NoError(t, err)
	f.h.Settle()
}

// owned returns the pods owned by owner, by name.
func (f *fixture) owned(owner string) map[string]Pod {
	out := map[string]Pod{}
	entries, _, _ := f.pods.List(context.Background())
	for _, e := range entries {
		if e.Value.Spec.Owner == owner {
			out[e.Key] = e.Value
		}
	}
	return out
}

// setPhase plays the node agent: it sets a pod's phase.
func (f *fixture) setPhase(t *testing.T, name, phase string) {
	t.Helper()
	p, rev, ok, _ := f.pods.Get(context.Background(), name)
	require.True(t, ok)
	p.Status = PodStatus{Phase: phase, PID: 1}
	_, err := f.pods.Update(context.Background(), name, p, rev)
	require.NoError(t, err)
}

func (f *fixture) status(t *testing.T, name string) (ReplicaSetStatus, object.Condition) {
	t.Helper()
	rs, _, ok, _ := f.rs.Get(context.Background(), name)
	require.True(t, ok)
	ready, _ := object.FindCondition(rs.Status.Conditions, CondReady)
	return rs.Status, ready
}

func TestReplicaSetController(t *testing.T) {
	f := newFixture(t)
	// A pod whose owner is gone: deleted when the controller starts.
	f.pods.Put("gone-xxxxx", Pod{Spec: PodSpec{Owner: "gone", Node: "local", Command: []string{"x"}}})
	ctl := f.replicaSetController()
	f.h.Settle()
	assert.Empty(t, f.owned("gone"), "orphans of a deleted ReplicaSet are deleted")

	f.apply(t, "web", 3)
	pods := f.owned("web")
	require.Len(t, pods, 3)
	st, ready := f.status(t, "web")
	assert.Equal(t, ReasonPodsNotReady, ready.Reason)
	assert.Equal(t, 3, st.Replicas)
	assert.Zero(t, st.ReadyReplicas)
	assert.EqualValues(t, 1, st.ObservedGeneration)
	rs, _, _, _ := f.rs.Get(context.Background(), "web")
	assert.Equal(t, []string{finalizer}, rs.Finalizers, "the finalizer is in place before the first pod")

	names := make([]string, 0, 3)
	for n := range pods {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names[:2] {
		f.setPhase(t, n, PhaseRunning)
	}
	f.h.Settle()
	st, ready = f.status(t, "web")
	assert.Equal(t, 2, st.ReadyReplicas)
	assert.Equal(t, object.ConditionFalse, ready.Status)

	f.apply(t, "web", 2)
	pods = f.owned("web")
	assert.Len(t, pods, 2)
	assert.NotContains(t, pods, names[2], "the pod that was not ready is deleted first")
	st, ready = f.status(t, "web")
	assert.Equal(t, object.ConditionTrue, ready.Status, "%+v", ready)
	assert.Equal(t, ReasonAllReady, ready.Reason)
	assert.EqualValues(t, 2, st.ObservedGeneration)

	// An impossible spec: a condition, and a terminal error, not a retry loop.
	f.apply(t, "web", -1)
	_, ready = f.status(t, "web")
	assert.Equal(t, ReasonInvalidSpec, ready.Reason)
	ks, ok := ctl.Status("web")
	require.True(t, ok)
	assert.True(t, ks.Terminal)
	assert.Len(t, f.owned("web"), 2, "an invalid spec leaves the pods alone")

	// A new command replaces the pods.
	f.apply(t, "web", 2, "sleep", "1000")
	pods = f.owned("web")
	require.Len(t, pods, 2)
	for n, p := range pods {
		assert.NotContains(t, names, n)
		assert.Equal(t, []string{"sleep", "1000"}, p.Spec.Command)
	}

	// Cascading delete: the finalizer keeps the ReplicaSet until its pods
	// are gone, then the controller removes it, which deletes it.
	_, op, err := informer.RequestDelete(context.Background(), f.st.replicaSets, "web")
	require.NoError(t, err)
	assert.Equal(t, informer.Updated, op, "deletion requested, not done: the finalizer holds it")
	f.h.Settle()
	assert.Empty(t, f.owned("web"))
	entries, _, _ := f.pods.List(context.Background())
	assert.Empty(t, entries)
	_, _, ok, _ = f.rs.Get(context.Background(), "web")
	assert.False(t, ok, "the ReplicaSet is deleted once its pods are")
}

// The node agent runs real processes (this test binary in worker mode),
// and its back-off runs on the harness's fake clock.
func TestAgent(t *testing.T) {
	t.Setenv(asMainEnv, "1") // the workers are this test binary
	f := newFixture(t)
	ag := newAgent("local", f.podInf, f.st.pods, crashBackOff{Base: 200 * time.Millisecond, Cap: time.Second}, newOSRunner(nil))
	ag.now, ag.grace = f.h.Clock.Now, time.Second
	mem := must.Do(events.NewMemorySink(0))
	ag.events = must.Do(events.NewRecorder(agentEventSource, events.WithClock(f.h.Clock), events.WithSink(mem)))
	t.Cleanup(ag.shutdown) // before the harness stops the controller
	ctl := reconciletest.Controller(f.h, "node-agent", ag, reconcile.For(f.podInf), reconcile.FromChannel("exits", ag.exits))

	status := func(name string) PodStatus {
		p, _, _, _ := f.pods.Get(context.Background(), name)
		return p.Status
	}
	f.pods.Put("web-a", Pod{Spec: PodSpec{Owner: "web", Node: "local", Command: []string{"replicaset", "worker"}}})
	f.pods.Put("other-node", Pod{Spec: PodSpec{Owner: "web", Node: "elsewhere", Command: []string{"replicaset", "worker"}}})
	f.pods.Put("broken", Pod{Spec: PodSpec{Owner: "web", Node: "local", Command: []string{"no-such-command"}}})
	f.h.Settle()

	st := status("web-a")
	require.Equal(t, PhaseRunning, st.Phase)
	require.True(t, alive(st.PID))
	assert.Zero(t, status("other-node"), "another node's pod is not ours to run")
	assert.Equal(t, PhaseFailed, status("broken").Phase)
	assert.Equal(t, ReasonInvalidCommand, status("broken").Reason)
	ks, ok := ctl.Status("broken")
	require.True(t, ok)
	assert.True(t, ks.Terminal, "an invalid command is terminal")

	// The first exit restarts at once; the exit comes in over the channel.
	first := st.PID
	require.NoError(t, killPID(first))
	require.Eventually(t, func() bool { return status("web-a").RestartCount == 1 }, 10*time.Second, time.Millisecond)
	st = status("web-a")
	assert.Equal(t, PhaseRunning, st.Phase)
	assert.Equal(t, "signal: killed", st.LastExit)
	assert.NotEqual(t, first, st.PID)

	// The second waits for the back-off, on the fake clock.
	require.NoError(t, killPID(st.PID))
	require.Eventually(t, func() bool { return status("web-a").Phase == PhaseWaiting }, 10*time.Second, time.Millisecond)
	st = status("web-a")
	assert.Equal(t, ReasonCrashLoopBackOff, st.Reason)
	assert.Equal(t, "200ms", st.BackOff)
	assert.Equal(t, f.h.Clock.Now().Add(200*time.Millisecond), st.NextRestartAt)
	backOff := mem.Events("web-a")
	require.Len(t, backOff, 1, "one BackOff event on the pod")
	assert.Equal(t, EventBackOff, backOff[0].Reason)
	assert.Equal(t, events.Warning, backOff[0].Type)
	assert.Equal(t, "Back-off restarting failed process (signal: killed)", backOff[0].Message)
	f.h.Step(199 * time.Millisecond)
	assert.Equal(t, PhaseWaiting, status("web-a").Phase)
	f.h.Step(time.Millisecond)
	st = status("web-a")
	assert.Equal(t, PhaseRunning, st.Phase)
	assert.Equal(t, 2, st.RestartCount)

	// Deleting the pod stops its process.
	_, _ = f.pods.Delete(context.Background(), "web-a", 0)
	f.h.Settle()
	assert.False(t, alive(st.PID))
}

func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
