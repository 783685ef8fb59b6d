package nodelifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/object"
)

// fixture runs both controllers on memory stores, the harness's informers
// and its fake clock, and plays the node agents: alive nodes renew their
// leases as the clock moves.
type fixture struct {
	*clustertest.Cluster
	t     *testing.T
	alive map[string]bool
}

func newFixture(t *testing.T, timings api.Timings) *fixture {
	t.Helper()
	f := &fixture{Cluster: clustertest.New(t), t: t, alive: map[string]bool{}}
	f.Timings = timings
	ctrls, err := New(f.Cluster.Cluster, Options{Controller: f.H.Options()})
	require.NoError(t, err)
	for _, ctrl := range ctrls {
		f.H.Add(ctrl)
	}
	return f
}

// addNode registers a Ready node in zone ("" for none) whose agent renews
// its lease from now on.
func (f *fixture) addNode(name, zone string) {
	now := f.H.Clock.Now()
	var n api.Node
	n.Name, n.CreationTimestamp = name, now
	if zone != "" {
		n.Labels = map[string]string{api.LabelTopologyZone: zone}
	}
	n.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: now}}
	f.Nodes.Put(name, n)
	f.alive[name] = true
	f.renew(name)
}

func (f *fixture) renew(name string) {
	key := api.Key(api.NodeLeaseNamespace, name)
	var l api.Lease
	l.Name, l.Namespace = name, api.NodeLeaseNamespace
	l.Spec = api.LeaseSpec{HolderIdentity: name, RenewTime: f.H.Clock.Now()}
	f.Leases.Put(key, l)
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
		f.H.Step(step)
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
	n, _, ok, err := f.Nodes.Get(context.Background(), name)
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
	_, _, ok, err := f.Pods.Get(context.Background(), api.Key("default", name))
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
	f.Pods.Put(p.Key(), p)
}

func (f *fixture) eventReasons(key string) []string {
	var out []string
	for _, e := range f.Events.Events(key) {
		out = append(out, e.Reason)
	}
	return out
}

func seconds(n int64) *int64 { return &n }
