package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/internal/clustertest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

// fixture is the scheduler on memory stores, a fake clock and the
// harness's informers, with its events kept in memory, and Kubernetes'
// timings.
type fixture struct {
	*clustertest.Cluster
	t *testing.T
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Cluster: clustertest.New(t), t: t}
	f.Timings = api.KubeTimings()
	ctrl, err := New(f.Cluster.Cluster, Options{Controller: f.H.Options()})
	require.NoError(t, err)
	f.H.Add(ctrl)
	return f
}

func (f *fixture) putNode(n api.Node) { f.Nodes.Put(n.Name, n) }
func (f *fixture) putPod(p api.Pod)   { f.Pods.Put(p.Key(), p) }

func (f *fixture) pod(name string) api.Pod {
	f.t.Helper()
	p, _, ok, err := f.Pods.Get(context.Background(), api.Key("default", name))
	require.NoError(f.t, err)
	require.True(f.t, ok, "pod %s", name)
	return p
}

// failedScheduling returns how many times FailedScheduling was recorded
// for a pod with one message: each failed cycle counts once.
func (f *fixture) failedScheduling(name string) (count int, message string) {
	for _, e := range f.Events.Events(api.Key("default", name)) {
		if e.Reason == EventFailedScheduling {
			count += e.Count
			message = e.Message
		}
	}
	return count, message
}

func TestSchedulerShouldBindAPodToANodeThatFitsAndMarkItScheduled(t *testing.T) {
	f := newFixture(t)
	f.putNode(readyNode("small", "1", "8Gi"))
	f.putNode(readyNode("big", "4", "8Gi"))
	f.putPod(reqPod("web", "2", "1Gi"))
	f.H.Settle()

	p := f.pod("web")
	assert.Equal(t, "big", p.Spec.NodeName)
	c, ok := object.FindCondition(p.Status.Conditions, api.PodScheduled)
	require.True(t, ok)
	assert.Equal(t, object.ConditionTrue, c.Status)
	evs := f.Events.Events("default/web")
	require.Len(t, evs, 1)
	assert.Equal(t, "Successfully assigned default/web to big", evs[0].Message)
}

func TestSchedulerShouldSpreadAnOwnersPodsOverEqualNodes(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		f.putNode(readyNode(n, "4", "8Gi"))
	}
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		f.putPod(ownedBy(reqPod(n, "100m", "128Mi"), "rs-1"))
	}
	f.H.Settle()

	perNode := map[string]int{}
	for _, n := range names {
		perNode[f.pod(n).Spec.NodeName]++
	}
	assert.Equal(t, map[string]int{"n1": 2, "n2": 2, "n3": 2}, perNode)
}

func TestSchedulerShouldNotGiveTheLastSlotToTwoPodsScheduledBackToBack(t *testing.T) {
	f := newFixture(t)
	n := readyNode("only", "4", "8Gi")
	n.Status.Allocatable[api.ResourcePods] = "1"
	f.putNode(n)
	// Both creates reach the scheduler before the first bind does: the
	// harness releases the changes in the order they were written.
	f.putPod(reqPod("first", "", ""))
	f.putPod(reqPod("second", "", ""))
	f.H.Settle()

	assert.Equal(t, "only", f.pod("first").Spec.NodeName)
	second := f.pod("second")
	assert.Empty(t, second.Spec.NodeName, "the slot the first pod took is not free")
	c, ok := object.FindCondition(second.Status.Conditions, api.PodScheduled)
	require.True(t, ok)
	assert.Equal(t, object.ConditionFalse, c.Status)
	assert.Equal(t, "0/1 nodes are available: 1 Too many pods.", c.Message)
}

func TestSchedulerShouldMarkAPodNoNodeFitsUnschedulableWithKubernetesMessage(t *testing.T) {
	f := newFixture(t)
	dead := readyNode("n1", "4", "8Gi")
	dead.Spec.Taints = []api.Taint{{Key: api.TaintNodeUnreachable, Effect: api.TaintNoExecute}}
	f.putNode(dead)
	f.putNode(readyNode("n2", "1", "8Gi"))
	f.putNode(readyNode("n3", "1", "8Gi"))
	f.putPod(reqPod("web", "2", "1Gi"))
	f.H.Settle()

	p := f.pod("web")
	assert.Empty(t, p.Spec.NodeName)
	c, ok := object.FindCondition(p.Status.Conditions, api.PodScheduled)
	require.True(t, ok)
	assert.Equal(t, object.ConditionFalse, c.Status)
	assert.Equal(t, api.ReasonUnschedulable, c.Reason)
	want := "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu."
	assert.Equal(t, want, c.Message)
	count, msg := f.failedScheduling("web")
	assert.Equal(t, 1, count)
	assert.Equal(t, want, msg)
}

func TestSchedulerShouldRetryAnUnschedulablePodWithADoublingBackOffUpToTheMax(t *testing.T) {
	f := newFixture(t) // kube timings: 1 s doubling to 10 s
	f.putNode(readyNode("n1", "1", "8Gi"))
	f.putPod(reqPod("web", "2", "1Gi"))
	f.H.Settle()
	count, _ := f.failedScheduling("web")
	require.Equal(t, 1, count)

	for i, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		f.H.Step(delay - time.Millisecond)
		count, _ = f.failedScheduling("web")
		assert.Equal(t, i+1, count, "no retry before %v", delay)
		f.H.Step(time.Millisecond)
		count, _ = f.failedScheduling("web")
		assert.Equal(t, i+2, count, "a retry %v after the last", delay)
	}
}

func TestSchedulerShouldRetryAtOnceWhenANodeIsAdded(t *testing.T) {
	f := newFixture(t)
	f.putPod(reqPod("web", "1", "1Gi"))
	f.H.Settle()
	_, msg := f.failedScheduling("web")
	require.Equal(t, "no nodes available to schedule pods", msg)

	f.putNode(readyNode("n1", "4", "8Gi"))
	f.H.Settle() // the clock does not move: no back-off expires
	assert.Equal(t, "n1", f.pod("web").Spec.NodeName)
}

func TestSchedulerShouldRetryAtOnceWhenANodeIsUncordoned(t *testing.T) {
	f := newFixture(t)
	n := readyNode("n1", "4", "8Gi")
	n.Spec.Unschedulable = true
	f.putNode(n)
	f.putPod(reqPod("web", "1", "1Gi"))
	f.H.Settle()
	_, msg := f.failedScheduling("web")
	require.Equal(t, "0/1 nodes are available: 1 node(s) were unschedulable.", msg)

	n.Spec.Unschedulable = false
	f.putNode(n)
	f.H.Settle()
	assert.Equal(t, "n1", f.pod("web").Spec.NodeName)
}

func TestSchedulerShouldRetryAtOnceWhenABoundPodIsDeleted(t *testing.T) {
	f := newFixture(t)
	n := readyNode("n1", "4", "8Gi")
	n.Status.Allocatable[api.ResourcePods] = "1"
	f.putNode(n)
	old := reqPod("old", "", "")
	old.Spec.NodeName = "n1"
	f.putPod(old)
	f.putPod(reqPod("web", "", ""))
	f.H.Settle()
	require.Empty(t, f.pod("web").Spec.NodeName)

	_, err := f.Pods.Delete(context.Background(), "default/old", 0)
	require.NoError(t, err)
	f.H.Settle()
	assert.Equal(t, "n1", f.pod("web").Spec.NodeName)
}

func TestSchedulerShouldNotRetryOnANodeChangeThatCannotHelp(t *testing.T) {
	f := newFixture(t)
	n := readyNode("n1", "1", "8Gi")
	f.putNode(n)
	f.putPod(reqPod("web", "2", "1Gi"))
	f.H.Settle()

	n.Annotations = map[string]string{"note": "a heartbeat-like write"}
	f.putNode(n)
	f.H.Settle()
	count, _ := f.failedScheduling("web")
	assert.Equal(t, 1, count)
}

func TestSchedulerShouldLeaveABoundOrDeletingPodAlone(t *testing.T) {
	f := newFixture(t)
	f.putNode(readyNode("n1", "4", "8Gi"))
	bound := reqPod("bound", "", "")
	bound.Spec.NodeName = "elsewhere"
	f.putPod(bound)
	deleting := reqPod("deleting", "", "")
	deleting.Finalizers = []string{"x"}
	deleting.DeletionRequested = time.Unix(1, 0)
	f.putPod(deleting)
	f.H.Settle()

	assert.Equal(t, "elsewhere", f.pod("bound").Spec.NodeName)
	assert.Empty(t, f.pod("deleting").Spec.NodeName)
	assert.Empty(t, f.Events.Keys())
}

func TestNewShouldRefuseABadBackOff(t *testing.T) {
	st := must.Do(api.NewMemoryStores())
	c := &api.Cluster{Stores: st, Informers: must.Do(api.NewInformers(st)), Timings: api.Timings{SchedulerBackOff: 2 * time.Second, SchedulerBackOffMax: time.Second}}
	_, err := New(c, Options{})
	assert.ErrorContains(t, err, "SchedulerBackOff <= SchedulerBackOffMax")
	_, err = New(&api.Cluster{}, Options{})
	assert.Error(t, err)
}
