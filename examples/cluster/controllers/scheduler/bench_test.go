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
	pi := mustPodInfo(ownedBy(reqPod("new", "100m", "128Mi"), "rs-1"))
	ctx := b.Context()

	b.ReportAllocs()
	for b.Loop() {
		if err := s.cacheCaughtUp(ctx); err != nil {
			b.Fatal(err)
		}
		s.mu.Lock()
		feasible, _ := filterNodes(&pi, s.cache.list())
		if pickNode(scoreNodes(&pi, feasible), 0, "default/new", "u") < 0 {
			b.Fatal("no node")
		}
		s.mu.Unlock()
	}
}
