package scheduler

import (
	"testing"
)

// BenchmarkSchedulingCycle measures one pod's scheduling cycle as the
// reconcile runs it (the cache caught up with the informers, its nodes
// filtered and scored, a node picked) in a cluster of 50 nodes and 1,000
// bound pods.
func BenchmarkSchedulingCycle(b *testing.B) {
	s := runningScheduler(b, 50, 1000)
	b.ReportAllocs()
	for b.Loop() {
		oneCycle(b, s)
	}
}

// oneCycle runs one pod's scheduling cycle on s as the reconcile does,
// without the bind: the cache caught up with the informers, its nodes
// filtered and scored, a node picked.
func oneCycle(tb testing.TB, s *scheduler) {
	pi := mustPodInfo(ownedBy(reqPod("new", "100m", "128Mi"), "rs-1"))
	if err := s.cacheCaughtUp(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	feasible, _ := filterNodes(&pi, s.cache.list())
	if len(feasible) == 0 || pickNode(scoreNodes(&pi, feasible), 0, "default/new", "u") < 0 {
		tb.Fatal("no node")
	}
}
