package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// BenchmarkClumpToReconcile measures the library's own cost on the path a
// write takes to its reconcile: memstore → informer → controller with 4
// workers, over 10k keys, one clump of 10 writes to distinct keys per
// iteration (as the steady-latency benchmark's writer makes them, about
// ten a millisecond), timed from the first write until every one of them
// has been reconciled. Nothing else runs, so the time is the pipeline's
// work and hand-offs, without the waits for a thread that a
// latency percentile also holds (docs/design/steady-latency.md).
//
//	go test -run xxx -bench BenchmarkClumpToReconcile -benchtime 20000x -count 5 ./reconcile/
func BenchmarkClumpToReconcile(b *testing.B) {
	const keys, clump = 10_000, 10
	type value struct{ gen int }
	store := must.Do(memstore.New[string, value]())
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("ns/object-%05d", i)
		store.Put(names[i], value{})
	}
	inf := must.Do(informer.New[string, value]("objects", store, informer.WithLogger(quietLogger)))
	// want holds, for each key of the clump in flight, the generation its
	// reconcile must read; left counts the keys not reconciled yet.
	var mu sync.Mutex
	want := map[string]int{}
	var left sync.WaitGroup
	// passed is closed once the first pass over every key is done: the
	// clumps are timed after it.
	var calls atomic.Int64
	passed := make(chan struct{})
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		if calls.Add(1) == keys {
			close(passed)
		}
		v, _ := inf.Get(key)
		mu.Lock()
		if g, ok := want[key]; ok && v.gen >= g {
			delete(want, key)
			left.Done()
		}
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	c := must.Do(reconcile.New("objects", rec, reconcile.For(inf), reconcile.WithWorkers(4), reconcile.WithLogger(quietLogger)))
	ctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = inf.Run(ctx) })
	run.Go(func() { _ = c.Run(ctx) })
	defer func() { cancel(); run.Wait() }()
	<-passed
	b.ResetTimer()
	for i := range b.N {
		first := (i * clump) % keys
		mu.Lock()
		for j := range clump {
			want[names[first+j]] = i + 1
		}
		mu.Unlock()
		left.Add(clump)
		for j := range clump {
			store.Put(names[first+j], value{gen: i + 1})
		}
		left.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/clump, "ns/write")
}
