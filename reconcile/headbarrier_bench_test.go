package reconcile_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// BenchmarkHeadBarrier measures what WithHeadBarrier costs a Run over a
// memory store of 10k keys whose informer runs already (a Manager's start,
// a new leader's term): the time from Run to the first reconcile, and the
// rate at which the Run's first pass reconciles every key, with the
// barrier off and on, over an idle store and over one written to
// continuously (its head moves while the barrier reads and waits). Each
// iteration runs one controller without the barrier and one with it, in
// alternating order, so that the two share the machine's load.
//
//	go test -run xxx -bench BenchmarkHeadBarrier -benchtime 50x -count 5 ./reconcile/
func BenchmarkHeadBarrier(b *testing.B) {
	const keys = 10_000
	for _, load := range []string{"idle", "writes"} {
		b.Run(load, func(b *testing.B) {
			store := must.Do(memstore.New[string, int]())
			for i := range keys {
				store.Put(fmt.Sprintf("key-%05d", i), i)
			}
			inf := must.Do(informer.New[string, int]("ints", store, informer.WithLogger(quietLogger)))
			ctx, cancel := context.WithCancel(context.Background())
			infDone := make(chan error, 1)
			go func() { infDone <- inf.Run(ctx) }()
			if err := inf.WaitForSync(ctx); err != nil {
				b.Fatal(err)
			}
			writerDone := make(chan struct{})
			go func() {
				defer close(writerDone)
				for i := 0; load == "writes" && ctx.Err() == nil; i++ {
					store.Put(fmt.Sprintf("w-%d", i%100), i) // 100 more keys, changing
					if i%64 == 0 {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			var first, pass [2]time.Duration // by barrier off, on
			b.ResetTimer()
			for i := range b.N {
				for j := range 2 {
					on := (i+j)%2 == 1
					f, p := headBarrierRun(b, inf, on, keys)
					k := map[bool]int{false: 0, true: 1}[on]
					first[k] += f
					pass[k] += p
				}
			}
			b.StopTimer()
			for k, name := range []string{"off", "on"} {
				b.ReportMetric(float64(first[k].Microseconds())/float64(b.N), name+"-first-reconcile-µs")
				b.ReportMetric(float64(keys)*float64(b.N)/pass[k].Seconds(), name+"-reconciles/s")
			}
			cancel()
			<-writerDone
			if err := <-infDone; err != nil {
				b.Error(err)
			}
		})
	}
}

// headBarrierRun runs one controller over inf until it has reconciled
// keys distinct calls, and returns when its first reconcile began and
// when the last ended, after Run was called.
func headBarrierRun(b *testing.B, inf *informer.Informer[string, int], barrier bool, keys int) (first, pass time.Duration) {
	var n atomic.Int64
	var firstAt atomic.Int64
	all := make(chan struct{})
	start := time.Now()
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		c := n.Add(1)
		if c == 1 {
			firstAt.Store(int64(time.Since(start)))
		}
		if c == int64(keys) {
			close(all)
		}
		return reconcile.Result{}, nil
	})
	opts := []reconcile.Option{reconcile.For(inf), reconcile.WithWorkers(4), reconcile.WithShutdownGrace(0), quiet}
	if barrier {
		opts = append(opts, reconcile.WithHeadBarrier())
	}
	c, err := reconcile.New("ints", rec, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-all
	pass = time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return time.Duration(firstAt.Load()), pass
}
