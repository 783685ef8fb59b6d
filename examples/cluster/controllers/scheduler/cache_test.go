package scheduler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/internal/must"
)

// runningScheduler returns a scheduler on memory stores seeded with nodes
// nodes and pods pods bound round-robin to them, its informers running
// and synced until the test ends.
func runningScheduler(tb testing.TB, nodes, pods int) *scheduler {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := must.Do(api.NewMemoryStores())
	for i := range nodes {
		n := readyNode(fmt.Sprintf("n%02d", i), "64", "256Gi")
		n.Status.Allocatable[api.ResourcePods] = "110"
		_, err := st.Nodes.Create(ctx, n.Name, n)
		require.NoError(tb, err)
	}
	for i := range pods {
		p := ownedBy(reqPod(fmt.Sprintf("p%04d", i), "100m", "128Mi"), fmt.Sprintf("rs-%d", i%10))
		p.Spec.NodeName = fmt.Sprintf("n%02d", i%nodes)
		_, err := st.Pods.Create(ctx, p.Key(), p)
		require.NoError(tb, err)
	}
	inf := must.Do(api.NewInformers(st))
	s := &scheduler{pods: inf.Pods, nodes: inf.Nodes, store: st.Pods, attempts: map[string]int{}}
	done := make(chan struct{}, 2)
	for _, run := range []func(context.Context) error{inf.Nodes.Run, inf.Pods.Run} {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	tb.Cleanup(func() { cancel(); <-done; <-done })
	require.NoError(tb, inf.Nodes.WaitForSync(ctx))
	require.NoError(tb, inf.Pods.WaitForSync(ctx))
	// Added to informers that hold their lists already, the cache's
	// handlers start from the informers' replay.
	require.NoError(tb, s.watchCache())
	require.NoError(tb, s.cacheCaughtUp(ctx))
	return s
}

func TestSchedulingCycleShouldNotCostMoreWithMorePods(t *testing.T) {
	cycleAllocs := func(s *scheduler) float64 {
		return testing.AllocsPerRun(20, func() { oneCycle(t, s) })
	}
	empty := cycleAllocs(runningScheduler(t, 50, 0))
	s := runningScheduler(t, 50, 1000)
	full := cycleAllocs(s)
	var pods int64
	for _, n := range s.cache.list() {
		pods += n.pods
	}
	require.Equal(t, int64(1000), pods, "the cache counts every bound pod")
	// A cycle that walked the pods allocated hundreds more with 1,000 of
	// them; waiting for the cache may cost a few, with or without pods.
	assert.InDelta(t, empty, full, 4, "a cycle allocates about as much with 1,000 pods as with none")
}

func TestSchedulerShouldFreeTheSlotOfAPodThatEndedForTheNextPod(t *testing.T) {
	f := newFixture(t)
	n := readyNode("n1", "4", "8Gi")
	n.Status.Allocatable[api.ResourcePods] = "1"
	f.putNode(n)
	done := reqPod("done", "", "")
	done.Spec.NodeName = "n1"
	f.putPod(done)
	f.putPod(reqPod("web", "", ""))
	f.H.Settle()
	require.Empty(t, f.pod("web").Spec.NodeName)

	done.Status.Phase = api.PodSucceeded
	f.putPod(done)
	f.H.Settle()
	assert.Equal(t, "n1", f.pod("web").Spec.NodeName)
}

func TestSchedulerShouldCountAPodMovedToAnotherNodeOnlyThere(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"n1", "n2"} {
		n := readyNode(name, "4", "8Gi")
		n.Status.Allocatable[api.ResourcePods] = "1"
		f.putNode(n)
	}
	moving := reqPod("moving", "", "")
	moving.Spec.NodeName = "n1"
	f.putPod(moving)
	f.H.Settle()
	moving.Spec.NodeName = "n2"
	f.putPod(moving)
	f.putPod(reqPod("web", "", ""))
	f.H.Settle()

	assert.Equal(t, "n1", f.pod("web").Spec.NodeName, "n1 is free again, n2 is full")
}

func TestSchedulerShouldCountAnAssumedPodOnceTheInformerShowsItBound(t *testing.T) {
	f := newFixture(t)
	n := readyNode("n1", "4", "8Gi")
	n.Status.Allocatable[api.ResourcePods] = "2"
	f.putNode(n)
	f.putPod(reqPod("first", "", ""))
	f.H.Settle()
	require.Equal(t, "n1", f.pod("first").Spec.NodeName)

	f.putPod(reqPod("second", "", ""))
	f.H.Settle()
	assert.Equal(t, "n1", f.pod("second").Spec.NodeName, "the first pod takes one of the two slots, not both")
}

func TestSchedulerShouldNotBindToANodeThatWasRemoved(t *testing.T) {
	f := newFixture(t)
	f.putNode(readyNode("gone", "4", "8Gi"))
	f.H.Settle()
	_, err := f.Nodes.Delete(context.Background(), "gone", 0)
	require.NoError(t, err)
	f.putPod(reqPod("web", "1", "1Gi"))
	f.H.Settle()

	assert.Empty(t, f.pod("web").Spec.NodeName)
	_, msg := f.failedScheduling("web")
	assert.Equal(t, "no nodes available to schedule pods", msg)
}

func TestNodeCacheShouldKeepAnAssumptionUntilTheInformerShowsTheBind(t *testing.T) {
	c := newNodeCache()
	c.setNode("n1", readyNode("n1", "4", "8Gi"))
	web := reqPod("web", "1", "1Gi")
	c.assume("default/web", "n1", mustPodInfo(web))
	c.setPod("default/web", web) // the informer still shows it unbound
	require.Len(t, c.list(), 1)
	assert.Equal(t, int64(1), c.list()[0].pods, "an unbound value leaves the assumption")

	web.Spec.NodeName = "n1"
	c.setPod("default/web", web)
	c.forget("default/web", web.UID) // a late bind error
	assert.Equal(t, int64(1), c.list()[0].pods, "the bound pod counts once, and a forget no longer drops it")
	assert.Equal(t, int64(1000), c.list()[0].cpu)

	c.removePod("default/web")
	assert.Zero(t, c.list()[0].pods)
	assert.Zero(t, c.list()[0].cpu)
}

func TestNodeCacheShouldCountPodsOfARemovedNodeWhenItIsAddedAgain(t *testing.T) {
	c := newNodeCache()
	c.setNode("n1", readyNode("n1", "4", "8Gi"))
	c.setNode("n2", readyNode("n2", "4", "8Gi"))
	p := withHostPort(ownedBy(reqPod("p", "1", "1Gi"), "rs-1"), 80)
	p.Spec.NodeName = "n1"
	c.setPod("default/p", p)

	c.deleteNode("n1")
	require.Len(t, c.list(), 1)
	assert.Equal(t, "n2", c.list()[0].node.Name)

	c.setNode("n1", readyNode("n1", "4", "8Gi"))
	require.Len(t, c.list(), 2)
	n1 := c.list()[0]
	assert.Equal(t, "n1", n1.node.Name)
	assert.Equal(t, int64(1), n1.pods)
	assert.Equal(t, 1, n1.ports[80])
	assert.Equal(t, 1, n1.owners["rs-1"])

	p.Status.Phase = api.PodFailed
	c.setPod("default/p", p)
	assert.Zero(t, n1.pods)
	assert.Empty(t, n1.ports, "an ended pod frees its host port")
	assert.Empty(t, n1.owners)
}

func TestSchedulingCycleShouldWaitForTheCacheToHoldWhatTheInformersHold(t *testing.T) {
	s := runningScheduler(t, 1, 0)
	ctx := t.Context()
	s.mu.Lock() // the cache's handler cannot apply the next change yet
	p := reqPod("late", "1", "1Gi")
	p.Spec.NodeName = "n00"
	rev, err := s.store.Create(ctx, p.Key(), p)
	require.NoError(t, err)
	require.NoError(t, s.pods.WaitForRevision(ctx, rev))

	counted := make(chan int64)
	go func() {
		if err := s.cacheCaughtUp(ctx); err != nil {
			counted <- -1
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		counted <- s.cache.list()[0].pods
	}()
	s.mu.Unlock()
	assert.Equal(t, int64(1), <-counted, "the pod the informer held when the cycle began is counted")
}
