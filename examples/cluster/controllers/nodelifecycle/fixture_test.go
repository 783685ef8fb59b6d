package nodelifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// fixture runs both controllers on memory stores, the harness's informers
// and its fake clock, and plays the node agents: alive nodes renew their
// leases as the clock moves.
type fixture struct {
	t      *testing.T
	h      *reconciletest.Harness
	nodes  *memstore.Store[string, api.Node]
	leases *memstore.Store[string, api.Lease]
	pods   *memstore.Store[string, api.Pod]
	sink   *events.MemorySink
	alive  map[string]bool
}

func newFixture(t *testing.T, timings api.Timings) *fixture {
	t.Helper()
	h := reconciletest.New(t)
	st := must.Do(api.NewMemoryStores())
	f := &fixture{t: t, h: h, sink: must.Do(events.NewMemorySink(0)), alive: map[string]bool{},
		nodes:  st.Nodes.(*memstore.Store[string, api.Node]),
		leases: st.Leases.(*memstore.Store[string, api.Lease]),
		pods:   st.Pods.(*memstore.Store[string, api.Pod])}
	c := &api.Cluster{
		Stores: st,
		Informers: api.Informers{
			Nodes:  reconciletest.Informer(h, "nodes", f.nodes),
			Leases: reconciletest.Informer(h, "leases", f.leases),
			Pods:   reconciletest.Informer(h, "pods", f.pods),
		},
		Timings: timings,
		Clock:   h.Clock,
		Recorder: func(source string) *events.Recorder {
			return must.Do(events.NewRecorder(source, events.WithClock(h.Clock), events.WithSink(f.sink)))
		},
		Logger: h.Logger(),
	}
	ctrls, err := NewControllers(c, Options{Controller: h.Options()})
	require.NoError(t, err)
	for _, ctrl := range ctrls {
		h.Add(ctrl)
	}
	return f
}

// addNode registers a Ready node in zone ("" for none) whose agent renews
// its lease from now on.
func (f *fixture) addNode(name, zone string) {
	now := f.h.Clock.Now()
	var n api.Node
	n.Name, n.CreationTimestamp = name, now
	if zone != "" {
		n.Labels = map[string]string{api.LabelTopologyZone: zone}
	}
	n.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: now}}
	f.nodes.Put(name, n)
	f.alive[name] = true
	f.renew(name)
}

func (f *fixture) renew(name string) {
	key := api.Key(api.NodeLeaseNamespace, name)
	var l api.Lease
	l.Name, l.Namespace = name, api.NodeLeaseNamespace
	l.Spec = api.LeaseSpec{HolderIdentity: name, RenewTime: f.h.Clock.Now()}
	f.leases.Put(key, l)
}

// kill stops a node's agent: its lease is no longer renewed.
func (f *fixture) kill(names ...string) {
	for _, n := range names {
		f.alive[n] = false
	}
}

func (f *fixture) revive(name string) {
	f.alive[name] = true
	f.renew(name)
}

// advance moves the clock by d in steps of step, the alive agents renewing
// their leases at every step.
func (f *fixture) advance(d, step time.Duration) {
	for done := time.Duration(0); done < d; done += step {
		for _, n := range f.aliveNames() {
			f.renew(n)
		}
		f.h.Step(step)
	}
}

func (f *fixture) aliveNames() []string {
	var out []string
	for n, ok := range f.alive {
		if ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) node(name string) api.Node {
	f.t.Helper()
	n, _, ok, err := f.nodes.Get(context.Background(), name)
	require.NoError(f.t, err)
	require.True(f.t, ok, "node %s", name)
	return n
}

func (f *fixture) ready(name string) object.ConditionStatus { return readyStatus(f.node(name)) }

// taint returns the node's taint of key and effect.
func (f *fixture) taint(name, key, effect string) (api.Taint, bool) {
	for _, t := range f.node(name).Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return t, true
		}
	}
	return api.Taint{}, false
}

func (f *fixture) hasPod(name string) bool {
	_, _, ok, err := f.pods.Get(context.Background(), api.Key("default", name))
	require.NoError(f.t, err)
	return ok
}

// putPod puts a Ready pod bound to node.
func (f *fixture) putPod(name, node string, tolerations ...api.Toleration) {
	var p api.Pod
	p.Name, p.Namespace, p.UID = name, "default", "uid-"+name
	p.Spec.NodeName = node
	p.Spec.Tolerations = tolerations
	p.Status.Phase = api.PodRunning
	p.Status.Conditions = []object.Condition{{Type: api.PodReady, Status: object.ConditionTrue, Reason: "ContainersReady"}}
	f.pods.Put(p.Key(), p)
}

func (f *fixture) eventReasons(key string) []string {
	var out []string
	for _, e := range f.sink.Events(key) {
		out = append(out, e.Reason)
	}
	return out
}

func seconds(n int64) *int64 { return &n }
