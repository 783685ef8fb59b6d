package scheduler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/internal/must"
)

// BenchmarkSchedulingCycle measures one pod's scheduling cycle as the
// reconcile runs it (the nodes and their pods read from the caches and
// parsed, filtered, scored, a node picked) in a cluster of 50 nodes and
// 1,000 bound pods.
func BenchmarkSchedulingCycle(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := must.Do(api.NewMemoryStores())
	for i := range 50 {
		n := readyNode(fmt.Sprintf("n%02d", i), "64", "256Gi")
		n.Status.Allocatable[api.ResourcePods] = "110"
		_, err := st.Nodes.Create(ctx, n.Name, n)
		require.NoError(b, err)
	}
	for i := range 1000 {
		p := ownedBy(reqPod(fmt.Sprintf("p%04d", i), "100m", "128Mi"), fmt.Sprintf("rs-%d", i%10))
		p.Spec.NodeName = fmt.Sprintf("n%02d", i%50)
		_, err := st.Pods.Create(ctx, p.Key(), p)
		require.NoError(b, err)
	}
	inf := must.Do(api.NewInformers(st))
	require.NoError(b, api.AddPodNodeNameIndex(inf.Pods))
	done := make(chan struct{}, 2)
	for _, run := range []func(context.Context) error{inf.Nodes.Run, inf.Pods.Run} {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	require.NoError(b, inf.Nodes.WaitForSync(ctx))
	require.NoError(b, inf.Pods.WaitForSync(ctx))
	s := &scheduler{pods: inf.Pods, nodes: inf.Nodes, assumed: map[string]assumedPod{}, attempts: map[string]int{}}
	pi := mustPodInfo(ownedBy(reqPod("new", "100m", "128Mi"), "rs-1"))

	b.ReportAllocs()
	for b.Loop() {
		s.mu.Lock()
		feasible, _ := filterNodes(&pi, s.nodeInfos())
		if pickNode(scoreNodes(&pi, feasible), 0, "default/new", "u") < 0 {
			b.Fatal("no node")
		}
		s.mu.Unlock()
	}
	b.StopTimer()
	cancel()
	<-done
	<-done
}
