package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	addAfterWorkers  = 4
	addAfterMaxDelay = 100 * time.Millisecond
	addAfterTimeout  = 60 * time.Second

	steadyRate     = 50_000 // adds per second
	steadyDuration = 2 * time.Second
	steadyWorkers  = 4
	steadyTimeout  = 30 * time.Second
)

// BenchmarkAddAfter is scenario 4: one producer calls AddAfter for 1M
// distinct keys with random 0-100 ms delays (pre-generated, same seed for
// every queue) while 4 workers Get+Done. The due time of each key is taken
// from the clock at its AddAfter call; a worker's only extra work is reading
// the clock after Get. Reports the lateness (Get time minus due time)
// percentiles in ms and the cost of one AddAfter call in ns (wall time of the
// producer loop, which includes one clock read per call, divided by the
// number of calls). Every queue runs the full 1M keys; the priority queue
// takes ~5 s for it.
func BenchmarkAddAfter(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, addAfterKeys)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(addAfterMaxDelay) + 1))
	}
	keys := distinctKeys(addAfterKeys)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var late []int64
			var addNs float64
			for range b.N {
				l, ns := addAfterOnce(b, newQueueFor(im, nil), keys, delays)
				late = append(late, l...)
				addNs += ns
			}
			slices.Sort(late)
			ms := func(ns int64) float64 { return float64(ns) / 1e6 }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(addNs/float64(b.N), "addafter-ns")
			b.ReportMetric(ms(percentile(late, 50)), "p50-late-ms")
			b.ReportMetric(ms(percentile(late, 99)), "p99-late-ms")
			b.ReportMetric(ms(late[len(late)-1]), "max-late-ms")
		})
	}
}

// addAfterOnce returns the lateness of every key in ns and the cost of one
// AddAfter call in ns.
func addAfterOnce(b *testing.B, q Queue, keys []string, delays []time.Duration) ([]int64, float64) {
	n := len(keys)
	due := make([]int64, n)
	recs := make([]getRec, n)
	var next atomic.Int64
	allDone := make(chan struct{})
	settle()
	base := time.Now()
	var workers sync.WaitGroup
	for range addAfterWorkers {
		workers.Go(func() {
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				at := int64(time.Since(base))
				if i := next.Add(1) - 1; i < int64(n) {
					recs[i] = getRec{k, at}
					if i == int64(n)-1 {
						close(allDone)
					}
				}
				q.Done(k)
			}
		})
	}
	start := time.Now()
	for i, k := range keys {
		now := int64(time.Since(base))
		q.AddAfter(k, delays[i])
		due[i] = now + int64(delays[i])
	}
	addElapsed := time.Since(start)
	ok := waitOrTimeout(allDone, addAfterTimeout)
	shutdown(q, &workers)
	if !ok {
		b.Fatalf("only %d of %d delayed keys came out within %v", next.Load(), n, addAfterTimeout)
	}
	late := make([]int64, n)
	for i, r := range recs {
		late[i] = r.at - due[keyIndex(r.key)]
	}
	return late, float64(addElapsed.Nanoseconds()) / float64(n)
}

// BenchmarkSteady is scenario 5: one producer adds distinct keys at a steady
// 50k/s for 2 s, each at its slot of a precomputed schedule (no bursts), while
// 4 workers Get+Done. Reports add→Get latency percentiles in µs and the add
// rate the producer actually achieved.
func BenchmarkSteady(b *testing.B) {
	n := int(steadyRate * steadyDuration / time.Second)
	keys := distinctKeys(n)
	sched := steadySchedule(n, steadyRate)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var lat []int64
			var rate float64
			var host hostStats
			for range b.N {
				l, r, h := steadyOnce(b, newQueueFor(im, nil), keys, sched)
				lat = append(lat, l...)
				rate += r
				host = host.add(h)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(rate/float64(b.N), "adds/s")
			reportLatencyMicros(b, lat)
			host.report(b)
		})
	}
}

// steadyOnce returns every key's add→Get latency in ns, the achieved rate
// and what the host did to the process meanwhile.
func steadyOnce(b *testing.B, q Queue, keys []string, sched []int64) ([]int64, float64, hostStats) {
	n := len(keys)
	added := make([]int64, n)
	recs := make([]getRec, n)
	var next atomic.Int64
	allDone := make(chan struct{})
	settle()
	hw := startHostWatch(b)
	var workers sync.WaitGroup
	base := time.Now()
	hw.mark("base")
	for range steadyWorkers {
		workers.Go(func() {
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				at := int64(time.Since(base))
				if i := next.Add(1) - 1; i < int64(n) {
					recs[i] = getRec{k, at}
					if i == int64(n)-1 {
						close(allDone)
					}
				}
				q.Done(k)
			}
		})
	}
	for i, k := range keys {
		hw.gaps.sleepUntil(base, sched[i])
		added[i] = int64(time.Since(base))
		q.Add(k)
	}
	rate := float64(n-1) / (float64(added[n-1]-added[0]) / 1e9)
	ok := waitOrTimeout(allDone, steadyTimeout)
	shutdown(q, &workers)
	if !ok {
		b.Fatalf("only %d of %d keys came out within %v", next.Load(), n, steadyTimeout)
	}
	lat := make([]int64, n)
	worst := 0
	for i, r := range recs {
		lat[i] = r.at - added[keyIndex(r.key)]
		if lat[i] > lat[worst] {
			worst = i
		}
	}
	hw.worst = fmt.Sprintf("worst add→Get %v, added %v after base", time.Duration(lat[worst]), time.Duration(added[keyIndex(recs[worst].key)]))
	return lat, rate, hw.stop(b, repP999(lat))
}

// repP999 is the p99.9 of one repetition's latencies (ns), lat unchanged.
func repP999(lat []int64) time.Duration {
	return time.Duration(percentile(slices.Sorted(slices.Values(lat)), 99.9))
}

// steadySchedule returns the offsets, in nanoseconds from the start, of n
// events at rate per second, the first after 1 ms.
func steadySchedule(n, rate int) []int64 {
	interval := time.Second / time.Duration(rate)
	sched := make([]int64, n)
	for i := range sched {
		sched[i] = int64(time.Millisecond + time.Duration(i)*interval)
	}
	return sched
}

// reportLatencyMicros sorts lat (nanoseconds) and reports its p50, p99,
// p999 and max in µs.
func reportLatencyMicros(b *testing.B, lat []int64) {
	slices.Sort(lat)
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	b.ReportMetric(us(percentile(lat, 50)), "p50-µs")
	b.ReportMetric(us(percentile(lat, 99)), "p99-µs")
	b.ReportMetric(us(percentile(lat, 99.9)), "p999-µs")
	b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
}

// clockGaps notes the longest time between two consecutive clock reads of
// a writer that did not sleep between them. The writer only writes
// between such reads, so a long gap is time in which its thread did not
// run: the host kept the process off the CPU, or the garbage collector
// stopped the world (gc-pause-max-µs tells which). The zero value is
// ready to use.
type clockGaps struct {
	max time.Duration
	// last is sleepUntil's latest clock read, in ns since its base; valid
	// is false before the first and after a sleep.
	last  int64
	valid bool
}

// sleepUntil returns at base+at or later (at in nanoseconds), sleeping
// until then: with ~1 ms timers it returns up to about a millisecond
// late, so that consecutive calls for writes due meanwhile return at once,
// one after the other. Unlike waitUntil, it leaves the processor to the
// goroutines under test, and the threads they wake need not queue behind
// the writer's for a CPU. Gaps are noted across calls: between two calls
// that did not sleep, a gap also holds the caller's write.
func (g *clockGaps) sleepUntil(base time.Time, at int64) {
	for {
		now := int64(time.Since(base))
		if g.valid {
			g.max = max(g.max, time.Duration(now-g.last))
		}
		g.last, g.valid = now, true
		if at <= now {
			return
		}
		time.Sleep(time.Duration(at - now))
		g.valid = false // a gap that slept is not a stall
	}
}

// waitUntil returns at base+at (at in nanoseconds), as precisely as this
// machine allows. Timers have ~1 ms resolution here, so it sleeps only when
// far ahead and otherwise yields, so that the goroutines under test can run
// on this P while the caller waits; it holds a processor while it yields
// (see sleepUntil for a writer that must not).
func waitUntil(base time.Time, at int64) {
	for {
		wait := at - int64(time.Since(base))
		if wait <= 0 {
			return
		}
		if wait > int64(2*time.Millisecond) {
			time.Sleep(time.Duration(wait) - time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}
