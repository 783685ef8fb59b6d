package workqueue

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLockSpinBudget is the spin-budget curve: throughput and
// tail latency against the lock's spin budget (lockSpins, the polls before
// a contended Lock parks). For each budget it runs bench scenario 1's
// workload (8 producers add 1M distinct keys while 8 workers Get+Done;
// items/s) and scenario 5's (one producer adds distinct keys at 50k/s for
// 2 s, 4 workers; add→Get p99.9 and max in µs) on this package's queue
// alone: the ratios to client-go are bench/'s. One process per budget,
// interleaved, is what docs/design/queue-lock.md's table was made with:
//
//	for r in 1 2 3; do for s in 0 16 64 256 1024 4096; do
//	  go test -run xxx -bench "LockSpinBudget/spins=$s\$" -benchtime 1x ./internal/workqueue
//	done; done
func BenchmarkLockSpinBudget(b *testing.B) {
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%06d", i%100, i)
	}
	saved := lockSpins
	defer func() { lockSpins = saved }()
	for _, spins := range []int{0, 16, 64, 256, 1024, 4096} {
		b.Run(fmt.Sprintf("spins=%d", spins), func(b *testing.B) {
			lockSpins = spins
			var items, p999, maxLat float64
			for range b.N {
				items += spinThroughput(keys)
				lat := spinSteady(keys[:100_000], 50_000)
				p999 += float64(lat[len(lat)*999/1000]) / 1e3
				maxLat += float64(lat[len(lat)-1]) / 1e3
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(items/n, "items/s")
			b.ReportMetric(p999/n, "p999-µs")
			b.ReportMetric(maxLat/n, "max-µs")
		})
	}
}

// spinThroughput is scenario 1: it returns items/s.
func spinThroughput(keys []string) float64 {
	q := New[string]()
	defer q.ShutDown()
	runtime.GC()
	var done atomic.Int64
	finished := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for p := range 8 {
		wg.Go(func() {
			for i := p; i < len(keys); i += 8 {
				q.Add(keys[i])
			}
		})
	}
	spinWorkers(q, 8, &wg, func(string) {
		if done.Add(1) == int64(len(keys)) {
			close(finished)
		}
	})
	<-finished
	elapsed := time.Since(start)
	q.ShutDown()
	wg.Wait()
	return float64(len(keys)) / elapsed.Seconds()
}

// spinSteady is scenario 5: it returns every key's add→Get latency in ns,
// sorted. The producer yields while waiting for a key's slot, as bench/'s
// does (timers have ~1 ms resolution on the machines this ran on).
func spinSteady(keys []string, rate int) []int64 {
	q := New[string]()
	defer q.ShutDown()
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	runtime.GC()
	// added[i] is written before key i's Add, lat[i] by the one worker
	// that Gets key i: the queue's lock orders them.
	added, lat := make([]int64, len(keys)), make([]int64, len(keys))
	var got atomic.Int64
	finished := make(chan struct{})
	var wg sync.WaitGroup
	base := time.Now()
	spinWorkers(q, 4, &wg, func(k string) {
		i := index[k]
		lat[i] = int64(time.Since(base)) - added[i]
		if got.Add(1) == int64(len(keys)) {
			close(finished)
		}
	})
	interval := int64(time.Second) / int64(rate)
	for i, k := range keys {
		for int64(time.Since(base)) < int64(i)*interval {
			runtime.Gosched()
		}
		added[i] = int64(time.Since(base))
		q.Add(k)
	}
	<-finished
	q.ShutDown()
	wg.Wait()
	slices.Sort(lat)
	return lat
}

// spinWorkers starts n workers on wg that Get a key, call each with it (the
// key is still processing) and Done it, until q shuts down.
func spinWorkers(q *Queue[string], n int, wg *sync.WaitGroup, each func(string)) {
	for range n {
		wg.Go(func() {
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				each(k)
				q.Done(k)
			}
		})
	}
}
