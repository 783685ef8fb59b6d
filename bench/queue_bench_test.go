package bench

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	throughputProducers = 8
	throughputWorkers   = 8
	throughputTimeout   = 60 * time.Second
)

// BenchmarkThroughput is scenario 1: 8 producers Add their share of 1M
// distinct keys while 8 workers Get+Done until all 1M are processed. One
// workload per b.N iteration; reports items/s. The .../metrics variants give
// each queue a fresh Prometheus registry and turn its workqueue metrics on.
func BenchmarkThroughput(b *testing.B) {
	keys := distinctKeys(throughputKeys)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) { benchThroughput(b, im, keys, false) })
	}
	for _, im := range impls {
		b.Run(im.name+"/metrics", func(b *testing.B) { benchThroughput(b, im, keys, true) })
	}
}

func benchThroughput(b *testing.B, im impl, keys []string, withMetrics bool) {
	b.StopTimer()
	var total time.Duration
	for range b.N {
		var reg *prometheus.Registry
		if withMetrics {
			reg = prometheus.NewRegistry()
		}
		settle()
		d, ok, err := throughputOnce(newQueueFor(im, reg), keys, func() error {
			if reg == nil {
				return nil
			}
			return checkMetrics(reg, len(keys))
		})
		if !ok {
			b.Fatalf("%s: not all %d keys processed within %v", im.name, len(keys), throughputTimeout)
		}
		if err != nil {
			b.Fatalf("%s: %v", im.name, err)
		}
		total += d
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.N*len(keys))/total.Seconds(), "items/s")
}

// throughputOnce runs one workload and returns the time from the first Add
// until the last key was Done. check runs after that, before ShutDown.
func throughputOnce(q Queue, keys []string, check func() error) (time.Duration, bool, error) {
	n := int64(len(keys))
	var processed atomic.Int64
	allDone := make(chan struct{})
	var workers sync.WaitGroup
	for range throughputWorkers {
		workers.Go(func() {
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				q.Done(k)
				if processed.Add(1) == n {
					close(allDone)
				}
			}
		})
	}
	share := (len(keys) + throughputProducers - 1) / throughputProducers
	start := time.Now()
	var producers sync.WaitGroup
	for p := range throughputProducers {
		mine := keys[min(p*share, len(keys)):min((p+1)*share, len(keys))]
		producers.Go(func() {
			for _, k := range mine {
				q.Add(k)
			}
		})
	}
	ok := waitOrTimeout(allDone, throughputTimeout)
	elapsed := time.Since(start)
	producers.Wait()
	err := check()
	shutdown(q, &workers)
	return elapsed, ok, err
}

// checkMetrics verifies that a queue really recorded every key in its
// metrics: n adds, and n observations in each of the two histograms.
func checkMetrics(reg *prometheus.Registry, n int) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] += uint64(m.GetCounter().GetValue())
			case m.GetHistogram() != nil:
				got[mf.GetName()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	for _, name := range []string{
		"workqueue_adds_total",
		"workqueue_queue_duration_seconds",
		"workqueue_work_duration_seconds",
	} {
		if got[name] != uint64(n) {
			return fmt.Errorf("metrics: %s = %d, want %d", name, got[name], n)
		}
	}
	return nil
}

// roundTripOps is the minimum number of Add+Get+Done round trips measured,
// so that `-benchtime=1x` (b.N == 1) still measures something.
const roundTripOps = 1 << 20

// BenchmarkRoundTrip is scenario 2: Add+Get+Done on one goroutine, keys
// cycling over 1024 pre-generated keys. Reports ns/op and allocs/op of one
// round trip, measured over max(b.N, 1Mi) round trips.
func BenchmarkRoundTrip(b *testing.B) {
	keys := distinctKeys(1024)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			b.ReportAllocs() // shows the allocs/op and B/op reported below
			q := newQueueFor(im, nil)
			defer q.ShutDown()
			for _, k := range keys { // warm up: grow internal maps and slices
				roundTrip(b, q, k)
			}
			n := max(b.N, roundTripOps)
			settle()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			b.StartTimer()
			start := time.Now()
			for i := range n {
				roundTrip(b, q, keys[i&1023])
			}
			elapsed := time.Since(start)
			b.StopTimer()
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/op")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n), "B/op")
		})
	}
}

func roundTrip(b *testing.B, q Queue, k string) {
	q.Add(k)
	got, shut := q.Get()
	if shut || got != k {
		b.Fatalf("Get = %q, %v; want %q", got, shut, k)
	}
	q.Done(got)
}

// BenchmarkMemory is scenario 3: live heap per queued key with 1M distinct
// keys queued (HeapAlloc after GC, before and after adding the pre-generated
// keys, divided by 1M). The keys' own bytes are allocated before the first
// reading, so only the queue's structures are counted. Reports B/key.
func BenchmarkMemory(b *testing.B) {
	keys := distinctKeys(memoryKeys)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var sum float64
			for range b.N {
				sum += bytesPerKey(b, im, keys)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(sum/float64(b.N), "B/key")
		})
	}
}

func bytesPerKey(b *testing.B, im impl, keys []string) float64 {
	var m0, m1 runtime.MemStats
	settle()
	runtime.ReadMemStats(&m0)
	q := newQueueFor(im, nil)
	for _, k := range keys {
		q.Add(k)
	}
	// Len makes the priority queue move its add buffer into its trees.
	if l := q.Len(); l != len(keys) {
		b.Fatalf("%s: Len = %d after adding %d distinct keys", im.name, l, len(keys))
	}
	settle()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(q)
	q.ShutDown()
	return (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(len(keys))
}

// processCPU is the CPU time the process has used (user and system), in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkThroughputPairs is scenario 1 as its target is stated:
// converge against client-go in back-to-back pairs (the order alternating),
// each pair a repetition, with and without metrics. It reports the
// per-pair ratio converge/client-go as its minimum, median and maximum over
// b.N pairs (run with -benchtime 5x for five), so that a host whose load
// drifts moves both sides of a pair alike, and the median ratio of CPU time
// per item (the process's, garbage collection included), which a shared
// host disturbs less than wall time.
func BenchmarkThroughputPairs(b *testing.B) {
	keys := distinctKeys(throughputKeys)
	byName := map[string]impl{}
	for _, im := range impls {
		byName[im.name] = im
	}
	for _, withMetrics := range []bool{false, true} {
		name := "plain"
		if withMetrics {
			name = "metrics"
		}
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			var ratios, cpuRatios []float64
			for i := range b.N {
				pair := [2]impl{byName["converge"], byName["client-go"]}
				if i%2 == 1 {
					pair[0], pair[1] = pair[1], pair[0]
				}
				rate, cpu := map[string]float64{}, map[string]float64{}
				for _, im := range pair {
					var reg *prometheus.Registry
					if withMetrics {
						reg = prometheus.NewRegistry()
					}
					settle()
					cpu0 := processCPU()
					d, ok, _ := throughputOnce(newQueueFor(im, reg), keys, func() error { return nil })
					if !ok {
						b.Fatalf("%s: not all %d keys processed within %v", im.name, len(keys), throughputTimeout)
					}
					rate[im.name] = float64(len(keys)) / d.Seconds()
					cpu[im.name] = float64(processCPU()-cpu0) / float64(len(keys))
				}
				ratios = append(ratios, rate["converge"]/rate["client-go"])
				cpuRatios = append(cpuRatios, cpu["converge"]/cpu["client-go"])
				b.Logf("pair %d: converge %.0f items/s %.0f CPU-ns/item, client-go %.0f items/s %.0f CPU-ns/item; ratio %.2f, CPU ratio %.2f",
					i, rate["converge"], cpu["converge"], rate["client-go"], cpu["client-go"], ratios[i], cpuRatios[i])
			}
			slices.Sort(ratios)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ratios[0], "min-ratio")
			b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
			b.ReportMetric(ratios[len(ratios)-1], "max-ratio")
			slices.Sort(cpuRatios)
			b.ReportMetric(cpuRatios[len(cpuRatios)/2], "median-cpu-ratio")
		})
	}
}
