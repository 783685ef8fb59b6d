package nodelifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

func TestPodsShouldLeaveALostNodeWhenTheirTolerationRunsOut(t *testing.T) {
	f := newFixture(t, api.KubeTimings()) // grace 50 s, default toleration 300 s
	for _, n := range []string{"n1", "n2", "n3"} {
		f.addNode(n, "")
	}
	unreachable := func(s *int64) api.Toleration {
		return api.Toleration{Key: api.TaintNodeUnreachable, Operator: "Exists", Effect: api.TaintNoExecute, TolerationSeconds: s}
	}
	f.putPod("short", "n1", unreachable(seconds(30)))
	f.putPod("forever", "n1", unreachable(nil))
	f.putPod("default", "n1")
	f.putPod("elsewhere", "n2")
	f.H.Settle()

	f.kill("n1")
	f.advance(55*time.Second, time.Second)
	taint, ok := f.taint("n1", api.TaintNodeUnreachable, api.TaintNoExecute)
	require.True(t, ok)
	require.Equal(t, f.H.Clock.Now().UTC(), taint.TimeAdded)
	p, _, _, err := f.Pods.Get(context.Background(), "default/short")
	require.NoError(t, err)
	assert.False(t, p.IsReady(), "the pods of a node that is not Ready are not Ready")

	f.advance(29*time.Second, time.Second)
	require.True(t, f.hasPod("short"), "29 s into a 30 s toleration")
	f.advance(time.Second, time.Second)
	assert.False(t, f.hasPod("short"), "30 s after the taint was added")
	assert.Contains(t, f.eventReasons("default/short"), EventTaintManagerEviction)

	f.advance(269*time.Second, time.Second)
	require.True(t, f.hasPod("default"), "299 s into the default 300 s")
	f.advance(time.Second, time.Second)
	assert.False(t, f.hasPod("default"), "a pod without a toleration of its own gets the default")

	f.advance(time.Hour, 10*time.Second)
	assert.True(t, f.hasPod("forever"), "a toleration without seconds is for ever")
	elsewhere, _, _, err := f.Pods.Get(context.Background(), "default/elsewhere")
	require.NoError(t, err)
	assert.True(t, elsewhere.IsReady())
}

func TestAPodShouldBeEvictedAtOnceFromANodeWithANoExecuteTaintItDoesNotTolerate(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("n1", "")
	f.putPod("plain", "n1")
	f.putPod("tolerant", "n1", api.Toleration{Key: "maintenance", Operator: "Exists"})
	f.H.Settle()

	n := f.node("n1")
	n.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintNoExecute, TimeAdded: f.H.Clock.Now()}}
	f.Nodes.Put("n1", n)
	f.H.Settle()

	assert.False(t, f.hasPod("plain"))
	assert.True(t, f.hasPod("tolerant"))
	assert.Equal(t, "Marking for deletion Pod default/plain", f.Events.Events("default/plain")[0].Message)
}

func TestAPodShouldBeEvictedAtTheEarliestOfItsTolerationsDeadlines(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("n1", "")
	f.putPod("web", "n1",
		api.Toleration{Key: "a", Operator: "Exists", Effect: api.TaintNoExecute, TolerationSeconds: seconds(100)},
		api.Toleration{Key: "b", Operator: "Exists", Effect: api.TaintNoExecute, TolerationSeconds: seconds(60)})
	f.H.Settle()
	now := f.H.Clock.Now()
	n := f.node("n1")
	// a was added 50 s ago (due in 50 s), b now (due in 60 s).
	n.Spec.Taints = []api.Taint{
		{Key: "a", Effect: api.TaintNoExecute, TimeAdded: now.Add(-50 * time.Second)},
		{Key: "b", Effect: api.TaintNoExecute, TimeAdded: now},
	}
	f.Nodes.Put("n1", n)
	f.H.Settle()

	f.H.Step(49 * time.Second)
	require.True(t, f.hasPod("web"))
	f.H.Step(time.Second)
	assert.False(t, f.hasPod("web"))
}

func TestAPodBoundToANodeThatNoLongerExistsShouldBeDeleted(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("n1", "")
	f.putPod("kept", "n1")
	f.putPod("orphan", "gone")
	f.H.Settle()
	assert.True(t, f.hasPod("kept"))
	assert.False(t, f.hasPod("orphan"))

	_, err := f.Nodes.Delete(context.Background(), "n1", 0)
	require.NoError(t, err)
	f.H.Settle()
	assert.False(t, f.hasPod("kept"), "its node was deleted")
}

func TestAPodWithFinalizersShouldOnlyBeAskedToGo(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	var p api.Pod
	p.Name, p.Namespace, p.UID = "held", "default", "u"
	p.Spec.NodeName = "gone"
	p.Finalizers = []string{"example.com/hold"}
	f.Pods.Put(p.Key(), p)
	f.H.Settle()

	got, _, ok, err := f.Pods.Get(context.Background(), "default/held")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, got.Deleting())
}

func TestDefaultTolerationsShouldOnlyBeAddedWhereThePodHasNone(t *testing.T) {
	all := withDefaultTolerations(nil, 300)
	require.Len(t, all, 2)
	for _, tol := range all {
		assert.Equal(t, int64(300), *tol.TolerationSeconds)
	}
	own := []api.Toleration{{Key: api.TaintNodeUnreachable, Operator: "Exists", TolerationSeconds: seconds(5)}}
	got := withDefaultTolerations(own, 300)
	require.Len(t, got, 2)
	assert.Equal(t, api.TaintNodeNotReady, got[1].Key)
	assert.Len(t, withDefaultTolerations([]api.Toleration{{Operator: "Exists"}}, 300), 1, "tolerating everything covers both")
	assert.Empty(t, withDefaultTolerations(nil, 0))
}

func TestANotReadyNodeShouldMarkOnlyItsReadyPodsNotReady(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("n1", "")
	f.addNode("n2", "")
	f.putPod("on-n1", "n1")
	f.putPod("on-n2", "n2")
	f.H.Settle()
	n := f.node("n1")
	object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionFalse, Reason: "KubeletNotReady"}, f.H.Clock.Now())
	f.Nodes.Put("n1", n)
	f.H.Settle()

	p, _, _, err := f.Pods.Get(context.Background(), "default/on-n1")
	require.NoError(t, err)
	c, _ := object.FindCondition(p.Status.Conditions, api.PodReady)
	assert.Equal(t, object.ConditionFalse, c.Status)
	assert.Equal(t, "ContainersReady", c.Reason, "the reason is kept, as MarkPodsNotReady keeps it")
	p, _, _, err = f.Pods.Get(context.Background(), "default/on-n2")
	require.NoError(t, err)
	assert.True(t, p.IsReady())
}
