package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	stormProducers = 4
	stormAdds      = 1_000_000 // per producer
	stormKeys      = 1000
	stormWorkers   = 4
	stormTimeout   = 120 * time.Second
)

// BenchmarkStorm is scenario 6: 4 producers each Add 1M times, cycling over
// the same 1k keys (so nearly every Add is a dedup hit), while 4 workers
// Get+Done. Reports how many keys the workers received while the storm
// lasted (storm-gets), the longest time any worker waited between two keys
// during the storm, counting from the storm's start and up to its end
// (max-gap-ms), and the storm's duration (storm-ms).
func BenchmarkStorm(b *testing.B) {
	keys := distinctKeys(stormKeys)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var gets, gap, dur float64
			for range b.N {
				g, mg, d := stormOnce(b, newQueueFor(im, nil), keys)
				gets += float64(g)
				gap = max(gap, float64(mg)/1e6)
				dur += float64(d) / 1e6
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(gets/float64(b.N), "storm-gets")
			b.ReportMetric(gap, "max-gap-ms")
			b.ReportMetric(dur/float64(b.N), "storm-ms")
		})
	}
}

type stormWorker struct {
	gets   int64
	maxGap int64 // ns
	last   int64 // ns since base of the last Get during the storm
}

// stormOnce returns the keys received during the storm, the longest gap in
// ns and the storm's duration in ns.
func stormOnce(b *testing.B, q Queue, keys []string) (int64, int64, int64) {
	settle()
	var over atomic.Bool
	res := make([]stormWorker, stormWorkers)
	base := time.Now()
	stormStart := int64(time.Since(base))
	var workers sync.WaitGroup
	for w := range stormWorkers {
		workers.Go(func() {
			s := stormWorker{last: stormStart}
			for {
				k, shut := q.Get()
				if shut {
					break
				}
				if !over.Load() {
					now := int64(time.Since(base))
					s.maxGap = max(s.maxGap, now-s.last)
					s.last = now
					s.gets++
				}
				q.Done(k)
			}
			res[w] = s
		})
	}
	deadline := time.Now().Add(stormTimeout)
	var timedOut atomic.Bool
	var producers sync.WaitGroup
	for p := range stormProducers {
		producers.Go(func() {
			j := p * stormKeys / stormProducers
			for i := range stormAdds {
				q.Add(keys[j])
				if j++; j == len(keys) {
					j = 0
				}
				if i&0xffff == 0 && time.Now().After(deadline) {
					timedOut.Store(true)
					return
				}
			}
		})
	}
	producers.Wait()
	stormEnd := int64(time.Since(base))
	over.Store(true)
	shutdown(q, &workers)
	if timedOut.Load() {
		b.Fatalf("storm of %d adds not finished within %v", stormProducers*stormAdds, stormTimeout)
	}
	var gets, maxGap int64
	for _, s := range res {
		gets += s.gets
		maxGap = max(maxGap, s.maxGap, stormEnd-s.last)
	}
	return gets, maxGap, stormEnd - stormStart
}
