package nodelifecycle

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

func TestANodeShouldTurnUnknownOnlyAfterTheGracePeriodWithoutARenewal(t *testing.T) {
	f := newFixture(t, api.KubeTimings()) // monitor every 5 s, grace 50 s
	t0 := f.H.Clock.Now()
	for _, n := range []string{"n1", "n2", "n3"} {
		f.addNode(n, "")
	}
	f.H.Settle()
	f.kill("n1")

	f.advance(50*time.Second, time.Second)
	require.Equal(t, object.ConditionTrue, f.ready("n1"), "50 s without a renewal is not more than the grace")
	_, tainted := f.taint("n1", api.TaintNodeUnreachable, api.TaintNoSchedule)
	require.False(t, tainted)

	f.advance(5*time.Second, time.Second) // the next check, at 55 s
	c, ok := object.FindCondition(f.node("n1").Status.Conditions, api.NodeReady)
	require.True(t, ok)
	assert.Equal(t, object.ConditionUnknown, c.Status)
	assert.Equal(t, ReasonNodeStatusUnknown, c.Reason)
	_, ok = f.taint("n1", api.TaintNodeUnreachable, api.TaintNoSchedule)
	assert.True(t, ok, "the NoSchedule taint comes at once")
	noExec, ok := f.taint("n1", api.TaintNodeUnreachable, api.TaintNoExecute)
	assert.True(t, ok, "the first NoExecute taint takes the bucket's one token")
	assert.Equal(t, t0.Add(55*time.Second).UTC(), noExec.TimeAdded)
	assert.Equal(t, []string{EventNodeNotReady}, f.eventReasons("n1"))
	assert.Equal(t, "Node n1 status is now: NodeNotReady", f.Events.Events("n1")[0].Message)
	for _, n := range []string{"n2", "n3"} {
		assert.Equal(t, object.ConditionTrue, f.ready(n))
		assert.Empty(t, f.node(n).Spec.Taints)
	}
}

func TestANodeThatNeverReportedShouldGetTheStartupGrace(t *testing.T) {
	f := newFixture(t, api.KubeTimings()) // startup grace 60 s
	for _, n := range []string{"n1", "n2"} {
		f.addNode(n, "")
	}
	var fresh api.Node
	fresh.Name, fresh.CreationTimestamp = "new", f.H.Clock.Now()
	f.Nodes.Put("new", fresh)
	f.H.Settle()

	f.advance(55*time.Second, time.Second)
	assert.Equal(t, object.ConditionStatus(""), f.ready("new"), "55 s is within the startup grace")
	f.advance(10*time.Second, time.Second)
	c, ok := object.FindCondition(f.node("new").Status.Conditions, api.NodeReady)
	require.True(t, ok)
	assert.Equal(t, object.ConditionUnknown, c.Status)
	assert.Equal(t, ReasonNodeStatusNeverSeen, c.Reason)
}

func TestARenewedLeaseShouldRestoreReadyAndLiftTheTaints(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	for _, n := range []string{"n1", "n2", "n3"} {
		f.addNode(n, "")
	}
	f.H.Settle()
	f.kill("n1")
	f.advance(60*time.Second, time.Second)
	require.Equal(t, object.ConditionUnknown, f.ready("n1"))
	_, ok := f.taint("n1", api.TaintNodeUnreachable, api.TaintNoExecute)
	require.True(t, ok)

	f.revive("n1")
	f.advance(5*time.Second, time.Second)
	c, _ := object.FindCondition(f.node("n1").Status.Conditions, api.NodeReady)
	assert.Equal(t, object.ConditionTrue, c.Status)
	assert.Equal(t, ReasonNodeLeaseRenewed, c.Reason)
	assert.Empty(t, f.node("n1").Spec.Taints)
	assert.ElementsMatch(t, []string{EventNodeNotReady, EventNodeReady}, f.eventReasons("n1"))
}

func TestANodeItsAgentReportsNotReadyShouldGetTheNotReadyTaints(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	for _, n := range []string{"n1", "n2", "n3"} {
		f.addNode(n, "")
	}
	f.H.Settle()
	n := f.node("n1")
	object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionFalse, Reason: "KubeletNotReady"}, f.H.Clock.Now())
	f.Nodes.Put("n1", n)
	f.H.Settle()

	assert.Equal(t, object.ConditionFalse, f.ready("n1"), "the agent's verdict stays while its lease is renewed")
	_, ok := f.taint("n1", api.TaintNodeNotReady, api.TaintNoSchedule)
	assert.True(t, ok)
	_, ok = f.taint("n1", api.TaintNodeNotReady, api.TaintNoExecute)
	assert.True(t, ok)
	_, ok = f.taint("n1", api.TaintNodeUnreachable, api.TaintNoExecute)
	assert.False(t, ok)
}

func TestACordonedNodeShouldCarryTheUnschedulableTaintUntilUncordoned(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("n1", "")
	f.H.Settle()
	n := f.node("n1")
	n.Spec.Unschedulable = true
	f.Nodes.Put("n1", n)
	f.H.Settle()
	_, ok := f.taint("n1", api.TaintNodeUnschedulable, api.TaintNoSchedule)
	require.True(t, ok)

	n = f.node("n1")
	n.Spec.Unschedulable = false
	f.Nodes.Put("n1", n)
	f.H.Settle()
	assert.Empty(t, f.node("n1").Spec.Taints)
}

// noExecuteTimes returns when each node got its unreachable NoExecute
// taint, sorted; nodes without one are left out.
func (f *fixture) noExecuteTimes(names ...string) []time.Time {
	var out []time.Time
	for _, n := range names {
		if t, ok := f.taint(n, api.TaintNodeUnreachable, api.TaintNoExecute); ok {
			out = append(out, t.TimeAdded)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func TestTaintsShouldArriveAtTheEvictionRateWhenNodesDieAtOnce(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		gap  time.Duration
	}{{0.1, 10 * time.Second}, {0.5, 2 * time.Second}} {
		t.Run(fmt.Sprintf("%v nodes a second", tc.rate), func(t *testing.T) {
			timings := api.KubeTimings()
			timings.NodeEvictionRate = tc.rate
			f := newFixture(t, timings)
			var all []string
			for i := range 10 {
				all = append(all, fmt.Sprintf("n%02d", i))
				f.addNode(all[i], "")
			}
			f.H.Settle()
			dead := all[:3]
			f.kill(dead...)
			f.advance(55*time.Second, time.Second)
			require.Len(t, f.noExecuteTimes(dead...), 1, "one token at first: burst 1")

			f.advance(3*tc.gap, time.Second)
			got := f.noExecuteTimes(dead...)
			require.Len(t, got, 3)
			assert.Equal(t, []time.Duration{tc.gap, tc.gap}, gaps(got))
		})
	}
}

func TestASmallUnhealthyZoneShouldTaintNoNodeForEviction(t *testing.T) {
	f := newFixture(t, api.KubeTimings()) // threshold 0.55, large cluster 50
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		f.addNode(n, "a")
	}
	for _, n := range []string{"b1", "b2", "b3"} {
		f.addNode(n, "b")
	}
	f.H.Settle()
	f.kill("a1", "a2", "a3") // 3 of 4: partially disrupted, and small

	f.advance(5*time.Minute, time.Second)
	for _, n := range []string{"a1", "a2", "a3"} {
		assert.Equal(t, object.ConditionUnknown, f.ready(n))
		_, ok := f.taint(n, api.TaintNodeUnreachable, api.TaintNoSchedule)
		assert.True(t, ok, "%s: NoSchedule is not rate-limited", n)
	}
	assert.Empty(t, f.noExecuteTimes("a1", "a2", "a3"), "eviction rate 0 in a small unhealthy zone")
}

func TestALargeUnhealthyZoneShouldTaintAtTheSecondaryRate(t *testing.T) {
	timings := api.KubeTimings()
	timings.LargeClusterSizeThreshold = 3 // a zone of 4 is large
	f := newFixture(t, timings)
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		f.addNode(n, "a")
	}
	f.addNode("b1", "b")
	f.H.Settle()
	f.kill("a1", "a2", "a3")

	f.advance(55*time.Second+250*time.Second, 5*time.Second)
	got := f.noExecuteTimes("a1", "a2", "a3")
	require.Len(t, got, 3)
	assert.Equal(t, []time.Duration{100 * time.Second, 100 * time.Second}, gaps(got), "0.01 nodes a second")
}

func TestAZoneWithTwoNotReadyNodesShouldStayHealthy(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	for _, n := range []string{"a1", "a2", "a3"} {
		f.addNode(n, "a")
	}
	f.addNode("b1", "b")
	f.H.Settle()
	f.kill("a1", "a2") // 2 of 3 is over the threshold, but not more than two

	f.advance(55*time.Second+10*time.Second, time.Second)
	got := f.noExecuteTimes("a1", "a2")
	require.Len(t, got, 2)
	assert.Equal(t, []time.Duration{10 * time.Second}, gaps(got), "the primary rate")
}

func TestAFullyDisruptedZoneShouldStillBeTaintedWhileAnotherZoneIsHealthy(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	f.addNode("a1", "a")
	f.addNode("b1", "b")
	f.H.Settle()
	f.kill("a1")
	f.advance(60*time.Second, time.Second)
	assert.Len(t, f.noExecuteTimes("a1"), 1)
}

func TestFullDisruptionShouldStopEvictionsAndLiftTheNoExecuteTaints(t *testing.T) {
	f := newFixture(t, api.KubeTimings())
	for _, n := range []string{"n1", "n2", "n3"} {
		f.addNode(n, "")
	}
	f.putPod("web", "n1") // tolerates unreachable for the default 300 s
	f.H.Settle()
	f.kill("n1")
	f.advance(60*time.Second, time.Second)
	require.Len(t, f.noExecuteTimes("n1"), 1)

	f.kill("n2", "n3")
	f.advance(60*time.Second, time.Second)
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Equal(t, object.ConditionUnknown, f.ready(n))
		_, ok := f.taint(n, api.TaintNodeUnreachable, api.TaintNoSchedule)
		assert.True(t, ok)
	}
	assert.Empty(t, f.noExecuteTimes("n1", "n2", "n3"), "no node is tainted for eviction when none is Ready")

	f.advance(10*time.Minute, 5*time.Second)
	assert.Empty(t, f.noExecuteTimes("n1", "n2", "n3"))
	assert.True(t, f.hasPod("web"), "no eviction in full disruption")

	f.revive("n2")
	f.advance(5*time.Second, time.Second)
	assert.Equal(t, object.ConditionTrue, f.ready("n2"))
	f.advance(20*time.Second, time.Second)
	assert.Len(t, f.noExecuteTimes("n1", "n3"), 2, "out of full disruption, the lost nodes are tainted again")
}

func TestComputeZoneStateShouldClassZonesAsKubernetesDoes(t *testing.T) {
	for _, tc := range []struct {
		ready, notReady int
		want            zoneState
	}{
		{3, 0, stateNormal},
		{0, 1, stateFullDisruption},
		{0, 0, stateNormal},
		{1, 2, stateNormal},             // 0.67 but only two
		{1, 3, statePartialDisruption},  // 0.75
		{3, 3, stateNormal},             // 0.5 < 0.55
		{9, 11, statePartialDisruption}, // exactly 0.55
	} {
		t.Run(fmt.Sprintf("%d ready %d not", tc.ready, tc.notReady), func(t *testing.T) {
			assert.Equal(t, tc.want, computeZoneState(tc.ready, tc.notReady, 0.55))
		})
	}
}

func TestBucketShouldGiveOneTokenAtOnceThenOnePerInterval(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := bucket{rate: 0.1}
	assert.True(t, b.take(t0))
	assert.False(t, b.take(t0))
	w, ok := b.wait(t0)
	assert.True(t, ok)
	assert.Equal(t, 10*time.Second, w)
	assert.False(t, b.take(t0.Add(10*time.Second-time.Nanosecond)))
	assert.True(t, b.take(t0.Add(10*time.Second)))
	assert.True(t, b.take(t0.Add(time.Hour)), "tokens do not pile up past the burst of 1")
	assert.False(t, b.take(t0.Add(time.Hour)))

	none := bucket{rate: 0}
	assert.False(t, none.take(t0))
	_, ok = none.wait(t0)
	assert.False(t, ok)
}

func TestNewShouldRefuseBadTimings(t *testing.T) {
	st := must.Do(api.NewMemoryStores())
	timings := api.KubeTimings()
	timings.NodeMonitorPeriod = 0
	timings.UnhealthyZoneThreshold = 2
	_, err := New(&api.Cluster{Stores: st, Informers: must.Do(api.NewInformers(st)), Timings: timings}, Options{})
	assert.ErrorContains(t, err, "NodeMonitorPeriod 0s, UnhealthyZoneThreshold 2")
	_, err = New(&api.Cluster{}, Options{})
	assert.Error(t, err)
}
