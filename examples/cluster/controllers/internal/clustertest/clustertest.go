// Package clustertest runs the cluster example's controllers in a test: the
// memory stores of every kind, their informers on a fake clock
// (reconcile/reconciletest), events kept in memory, and the two parts of a
// cluster a controller test plays by hand: the scheduler (Bind) and the node
// agents (Run, Ready, Fail). RunManager runs controllers' Add functions
// in a Manager instead, as the control plane does. Only the controllers'
// tests import it.
package clustertest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// Cluster is an api.Cluster over memory stores, run by a reconciletest
// harness.
type Cluster struct {
	*api.Cluster
	H *reconciletest.Harness
	// The stores, typed, to seed with Put.
	Deployments *memstore.Store[string, api.Deployment]
	ReplicaSets *memstore.Store[string, api.ReplicaSet]
	Pods        *memstore.Store[string, api.Pod]
	Nodes       *memstore.Store[string, api.Node]
	Leases      *memstore.Store[string, api.Lease]
	// Events holds what every component recorded.
	Events *events.MemorySink
	t      testing.TB
}

// New returns a cluster with empty stores and running informers, and
// api.FastTimings (set c.Timings before building a controller for others).
// The harness releases the informers' changes nodes and leases first, so
// that the nodes a test puts are there when its pods are looked at.
func New(t testing.TB) *Cluster {
	h := reconciletest.New(t)
	s, err := api.NewMemoryStores()
	require.NoError(t, err)
	sink, err := events.NewMemorySink(0)
	require.NoError(t, err)
	c := &Cluster{H: h, Events: sink, t: t,
		Deployments: s.Deployments.(*memstore.Store[string, api.Deployment]),
		ReplicaSets: s.ReplicaSets.(*memstore.Store[string, api.ReplicaSet]),
		Pods:        s.Pods.(*memstore.Store[string, api.Pod]),
		Nodes:       s.Nodes.(*memstore.Store[string, api.Node]),
		Leases:      s.Leases.(*memstore.Store[string, api.Lease]),
	}
	nodes := reconciletest.Informer(h, "nodes", c.Nodes)
	leases := reconciletest.Informer(h, "leases", c.Leases)
	c.Cluster = &api.Cluster{
		Stores: s,
		Informers: api.Informers{
			Nodes:       nodes,
			Leases:      leases,
			Deployments: reconciletest.Informer(h, "deployments", c.Deployments),
			ReplicaSets: reconciletest.Informer(h, "replicasets", c.ReplicaSets),
			Pods:        reconciletest.Informer(h, "pods", c.Pods),
		},
		Timings: api.FastTimings(),
		Clock:   h.Clock,
		Recorder: func(component string) *events.Recorder {
			rec, err := events.NewRecorder(component, events.WithClock(h.Clock), events.WithSink(c.Events))
			require.NoError(t, err)
			return rec
		},
		Logger: h.Logger(),
	}
	return c
}

// Ctx is the test's context.
func (c *Cluster) Ctx() context.Context { return c.H.Context() }

// PodsOf returns the pods whose name starts with prefix+"-" (every pod
// for an empty prefix), sorted by key.
func (c *Cluster) PodsOf(prefix string) []informer.Entry[string, api.Pod] {
	es, _, err := c.Pods.List(c.Ctx())
	require.NoError(c.t, err)
	es = slices.DeleteFunc(es, func(e informer.Entry[string, api.Pod]) bool {
		_, name := api.SplitKey(e.Key)
		return prefix != "" && !strings.HasPrefix(name, prefix+"-")
	})
	slices.SortFunc(es, func(a, b informer.Entry[string, api.Pod]) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// AllPods returns every pod, sorted by key.
func (c *Cluster) AllPods() []informer.Entry[string, api.Pod] { return c.PodsOf("") }

// Pod returns pod key; it fails the test if there is none.
func (c *Cluster) Pod(key string) api.Pod {
	p, _, ok, err := c.Pods.Get(c.Ctx(), key)
	require.NoError(c.t, err)
	require.True(c.t, ok, "pod %s", key)
	return p
}

// RS returns ReplicaSet key; it fails the test if there is none.
func (c *Cluster) RS(key string) api.ReplicaSet {
	v, _, ok, err := c.ReplicaSets.Get(c.Ctx(), key)
	require.NoError(c.t, err)
	require.True(c.t, ok, "replicaset %s", key)
	return v
}

// Deployment returns Deployment key; it fails the test if there is none.
func (c *Cluster) Deployment(key string) api.Deployment {
	v, _, ok, err := c.Deployments.Get(c.Ctx(), key)
	require.NoError(c.t, err)
	require.True(c.t, ok, "deployment %s", key)
	return v
}

// UpdatePod changes pod key with mutate, as the scheduler or an agent
// writes it.
func (c *Cluster) UpdatePod(key string, mutate func(p *api.Pod)) {
	_, _, err := informer.Update(c.Ctx(), c.Pods, key, func(p *api.Pod) error {
		mutate(p)
		return nil
	})
	require.NoError(c.t, err)
}

// Bind plays the scheduler: it binds every unbound pod to node.
func (c *Cluster) Bind(node string) {
	for _, e := range c.AllPods() {
		if e.Value.Spec.NodeName == "" {
			c.UpdatePod(e.Key, func(p *api.Pod) { p.Spec.NodeName = node })
		}
	}
}

// Run plays a node agent: pod key runs, not ready yet.
func (c *Cluster) Run(key string) {
	c.UpdatePod(key, func(p *api.Pod) {
		p.Status.Phase = api.PodRunning
		p.Status.StartTime = c.H.Clock.Now()
		object.SetCondition(&p.Status.Conditions, object.Condition{Type: api.PodReady, Status: object.ConditionFalse,
			Reason: "ContainersNotReady"}, c.H.Clock.Now())
	})
}

// Ready plays a node agent: pod key runs and is ready from now.
func (c *Cluster) Ready(key string) {
	c.UpdatePod(key, func(p *api.Pod) {
		p.Status.Phase = api.PodRunning
		object.SetCondition(&p.Status.Conditions, object.Condition{Type: api.PodReady, Status: object.ConditionTrue},
			c.H.Clock.Now())
	})
}

// Fail plays a node agent: pod key's process ended for good.
func (c *Cluster) Fail(key string) {
	c.UpdatePod(key, func(p *api.Pod) {
		p.Status.Phase = api.PodFailed
		object.SetCondition(&p.Status.Conditions, object.Condition{Type: api.PodReady, Status: object.ConditionFalse,
			Reason: "PodFailed"}, c.H.Clock.Now())
	})
}

// BindAndReadyAll binds every unbound pod to node and makes every pod
// that is not ready ready; it returns how many it made ready.
func (c *Cluster) BindAndReadyAll(node string) int {
	c.Bind(node)
	n := 0
	for _, e := range c.AllPods() {
		if !e.Value.IsReady() && e.Value.Status.Phase != api.PodFailed && e.Value.Status.Phase != api.PodSucceeded {
			c.Ready(e.Key)
			n++
		}
	}
	return n
}

// EventReasons returns the reasons of the events recorded on key, oldest
// first, each once.
func (c *Cluster) EventReasons(key string) []string {
	var out []string
	for _, e := range slices.Backward(c.Events.Events(key)) {
		out = append(out, e.Reason)
	}
	return out
}

// Step moves the fake clock by d and settles.
func (c *Cluster) Step(d time.Duration) { c.H.Step(d) }

// Settle settles the harness.
func (c *Cluster) Settle() { c.H.Settle() }
