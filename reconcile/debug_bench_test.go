package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// The size the debug pages are measured at (the goal: render under 100ms
// with 100k keys queued and 1k failing, without stalling the workers).
const (
	benchQueued  = 100_000
	benchFailing = 1_000
	// outageFailing is an outage's: every key failing.
	outageFailing = 100_000
)

// debugPages are the pages measured: the overview, the controller page and
// a failing key's and a queued key's page, in HTML and JSON.
var debugPages = []string{
	"/debug/converge/", "/debug/converge/?format=json",
	"/debug/converge/controllers/ints", "/debug/converge/controllers/ints?format=json",
	"/debug/converge/controllers/ints/keys/f-7", "/debug/converge/controllers/ints/keys/f-7?format=json",
	"/debug/converge/controllers/ints/keys/k-99999", "/debug/converge/controllers/ints/keys/k-99999?format=json",
}

// pagesFixture is a Manager with debug pages and one controller, "ints",
// whose queue holds benchQueued keys k-0... (fed by a FromFunc source) and
// which has failing keys f-0... failing (in an hour's backoff, with a
// 200-byte error).
type pagesFixture struct {
	m *reconcile.Manager
	c *reconcile.Controller[string]
	// enqueue is the FromFunc source's: it queues a key.
	enqueue func(string)
	// queued is called for each reconcile of a k- key.
	queued func(ctx context.Context, key string)
	stop   func()
}

// newPagesFixture starts the fixture; the k- keys are queued by fill.
func newPagesFixture(b *testing.B, workers, failing int, queued func(ctx context.Context, key string)) *pagesFixture {
	b.Helper()
	f := &pagesFixture{queued: queued}
	store := must.Do(memstore.New[string, int]())
	for i := range failing {
		store.Put(fmt.Sprintf("f-%d", i), 1)
	}
	ready := make(chan func(string), 1)
	source := reconcile.FromFunc("feed", func(ctx context.Context, enqueue func(string)) error {
		ready <- enqueue
		<-ctx.Done()
		return nil
	})
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		if strings.HasPrefix(key, "f-") {
			return reconcile.Result{}, errors.New("failing: " + strings.Repeat("x", 200))
		}
		f.queued(ctx, key)
		return reconcile.Result{}, nil
	})
	inf := must.Do(informer.New[string, int]("ints", store, informer.WithLogger(quietLogger)))
	c, err := reconcile.New("ints", rec, reconcile.For(inf), source, reconcile.WithWorkers(workers), quiet,
		reconcile.WithShutdownGrace(0),
		reconcile.WithRateLimiter(backoff.NewPerKey[string](backoff.Exponential{Base: time.Hour, Cap: time.Hour})))
	if err != nil {
		b.Fatal(err)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Logger: quietLogger,
		Debug: reconcile.DebugOptions{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.AddInformer(inf); err != nil {
		b.Fatal(err)
	}
	if err := m.AddController(c); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	f.m, f.c, f.enqueue = m, c, <-ready
	f.stop = func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
	waitFor(b, func() bool { return reconcile.Inspect(c).FailingTotal == failing })
	return f
}

// fill queues k-0 to k-(benchQueued-1).
func (f *pagesFixture) fill() {
	for i := range benchQueued {
		f.enqueue(fmt.Sprintf("k-%d", i))
	}
}

// BenchmarkDebugPages renders each page of a controller with 100k keys
// ready in its queue, a reconcile in progress and 1k failing keys (the
// target's size: under 100ms a page) or 100k (an outage);
// worst-ms is the slowest render:
//
//	go test -p 1 -run xxx -bench BenchmarkDebugPages$ -benchtime 20x ./reconcile/
func BenchmarkDebugPages(b *testing.B) {
	for _, failing := range []int{benchFailing, outageFailing} {
		b.Run(fmt.Sprintf("failing=%d", failing), func(b *testing.B) { renderPages(b, failing) })
	}
}

func renderPages(b *testing.B, failing int) {
	release := make(chan struct{})
	f := newPagesFixture(b, 1, failing, func(ctx context.Context, key string) {
		select { // the first k- key blocks the only worker: the rest stay queued
		case <-release:
		case <-ctx.Done():
		}
	})
	defer f.stop()
	defer close(release)
	f.fill()
	waitFor(b, func() bool {
		return reconcile.Inspect(f.c).Queue.Len == benchQueued-1 && reconcile.Inspect(f.c).Busy == 1
	})
	info := reconcile.Inspect(f.c)
	b.Logf("queued %d ready, %d failing, %d busy", info.Queue.Len, info.FailingTotal, info.Busy)
	h := f.m.DebugHandler()
	for _, page := range debugPages {
		b.Run(page, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				start := time.Now()
				code, body := getPageB(h, page)
				worst = max(worst, time.Since(start))
				if code != http.StatusOK {
					b.Fatalf("%s: %d %s", page, code, body)
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}

// BenchmarkDebugPagesWorkerStall measures the workers while the pages
// render, against the same workers while nothing renders, in interleaved
// rounds of one second each: 2 workers reconcile 100k queued keys that
// queue themselves again (so the queue stays at 100k), with 1k keys
// failing (the target's size) or 100k (an outage). Three modes: idle;
// paced, a page every 50ms (debugPages in turn: several people with
// auto-refreshing pages); and back-to-back, one goroutine rendering
// without pause. Per mode it reports the median over rounds of the
// reconciles per second, and of the p99, p99.9 and largest gap between two
// consecutive reconcile starts (any worker): a page that held the queue's
// or the controller's lock long enough to stall the workers would show as
// gaps that long, as often as it renders, and as lost throughput when
// paced. Back-to-back rendering also takes CPU from the workers (it keeps
// one of this machine's two cores busy): its throughput difference is
// mostly that. The largest gap also holds whatever else delays a goroutine
// (the scheduler, the GC, other processes): compare it with idle.
//
//	go test -p 1 -run xxx -bench BenchmarkDebugPagesWorkerStall -benchtime 1x ./reconcile/
func BenchmarkDebugPagesWorkerStall(b *testing.B) {
	for _, failing := range []int{benchFailing, outageFailing} {
		b.Run(fmt.Sprintf("failing=%d", failing), func(b *testing.B) { workerStall(b, failing) })
	}
}

func workerStall(b *testing.B, failing int) {
	const (
		rounds = 5
		window = time.Second
	)
	starts := &startLog{at: make([]int64, 4_000_000)}
	var f *pagesFixture
	f = newPagesFixture(b, 2, failing, func(_ context.Context, key string) {
		starts.note()
		f.enqueue(key) // dirty while processing: queued again once done
	})
	defer f.stop()
	f.fill()
	h := f.m.DebugHandler()
	type mode struct {
		name                        string
		every                       time.Duration // between renders; -1: no rendering
		rates, p99s, p999s, maxGaps []float64
		renders                     int
	}
	modes := []*mode{{name: "idle", every: -1}, {name: "paced", every: 50 * time.Millisecond}, {name: "back-to-back"}}
	for b.Loop() {
		for range rounds {
			for _, md := range modes {
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var renders atomic.Int64
				if md.every >= 0 {
					wg.Go(func() {
						var tick <-chan time.Time // nil: back to back
						if md.every > 0 {
							t := time.NewTicker(md.every)
							defer t.Stop()
							tick = t.C
						}
						for i := 0; ; i++ {
							if code, body := getPageB(h, debugPages[i%len(debugPages)]); code != http.StatusOK {
								b.Errorf("%d %s", code, body)
								return
							}
							renders.Add(1)
							if tick == nil {
								select {
								case <-stop:
									return
								default:
								}
								continue
							}
							select {
							case <-stop:
								return
							case <-tick:
							}
						}
					})
				}
				starts.reset()
				time.Sleep(window)
				got := starts.snapshot()
				close(stop)
				wg.Wait()
				rate, p99, p999, gap := startStats(got, window)
				md.rates, md.p99s, md.p999s, md.maxGaps = append(md.rates, rate), append(md.p99s, p99), append(md.p999s, p999), append(md.maxGaps, gap)
				md.renders += int(renders.Load())
				b.Logf("%-12s reconciles/s %8.0f  start gap p99 %6.1fµs p99.9 %7.1fµs max %8.1fµs  renders %d",
					md.name, rate, p99, p999, gap, renders.Load())
			}
		}
	}
	if q := reconcile.Inspect(f.c).Queue.Len; q < benchQueued/2 {
		b.Fatalf("the queue held %d keys, not ~%d", q, benchQueued)
	}
	for _, md := range modes {
		b.ReportMetric(median(md.rates), md.name+"-reconciles/s")
		b.ReportMetric(median(md.p99s), md.name+"-gap-p99-µs")
		b.ReportMetric(median(md.p999s), md.name+"-gap-p999-µs")
		b.ReportMetric(median(md.maxGaps), md.name+"-gap-max-µs")
		if md.every >= 0 {
			b.ReportMetric(float64(md.renders)/(rounds*window.Seconds()), md.name+"-renders/s")
		}
	}
}

// startLog notes the times reconciles start, up to len(at).
type startLog struct {
	n  atomic.Int64
	at []int64
}

func (l *startLog) note() {
	if i := l.n.Add(1) - 1; i < int64(len(l.at)) {
		atomic.StoreInt64(&l.at[i], time.Now().UnixNano())
	}
}

func (l *startLog) reset() { l.n.Store(0) }

// snapshot copies the starts noted since reset.
func (l *startLog) snapshot() []int64 {
	n := min(l.n.Load(), int64(len(l.at)))
	out := make([]int64, n)
	for i := range out {
		out[i] = atomic.LoadInt64(&l.at[i])
	}
	return slices.DeleteFunc(out, func(t int64) bool { return t == 0 })
}

// startStats returns the starts per second over window, and the p99,
// p99.9 and largest gap between consecutive starts, in microseconds.
func startStats(starts []int64, window time.Duration) (rate, p99, p999, maxGap float64) {
	slices.Sort(starts)
	if len(starts) < 2 {
		return float64(len(starts)) / window.Seconds(), 0, 0, 0
	}
	gaps := make([]int64, len(starts)-1)
	for i := range gaps {
		gaps[i] = starts[i+1] - starts[i]
	}
	slices.Sort(gaps)
	q := func(f float64) float64 { return float64(gaps[int(f*float64(len(gaps)-1))]) / 1e3 }
	return float64(len(starts)) / window.Seconds(), q(0.99), q(0.999), q(1)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func getPageB(h http.Handler, path string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "127.0.0.1:8081"
	w := &recorderW{header: http.Header{}}
	h.ServeHTTP(w, req)
	return w.code, w.body.String()
}

// recorderW is a minimal ResponseWriter (httptest's would do, but this
// keeps the benchmark's allocations to the page's own).
type recorderW struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (w *recorderW) Header() http.Header { return w.header }
func (w *recorderW) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}
func (w *recorderW) WriteHeader(code int) { w.code = code }

func waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("condition not reached within 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
