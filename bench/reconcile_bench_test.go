package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// The end-to-end controller scenarios: a store holding objects, an informer
// following it, and a controller reconciling every key with a no-op
// reconciler that reads the key's object from the informer's cache. Three
// pipelines are compared, one sub-benchmark each:
//
//   - converge: memstore.Store → informer.Informer → reconcile.Controller
//     (reconcile.For, reconcile.WithWorkers, default options otherwise);
//   - client-go: the fake ListWatch of the informer scenarios →
//     SharedIndexInformer → a handler adding MetaNamespaceKeyFunc keys to
//     workqueue.NewTypedRateLimitingQueueWithConfig (default controller rate
//     limiter, unnamed so no metrics) → N worker goroutines (Get, read the
//     indexer, Forget, Done), started once the informer and the handler's
//     registration report synced (waited for on channels, not polled);
//   - controller-runtime (reconcile_controllerruntime_test.go): the same
//     SharedIndexInformer → controller.NewTypedUnmanaged with default
//     options (its priority queue and its always-on metrics) watching a
//     source.TypedInformer with handler.TypedEnqueueRequestForObject, as
//     source.Kind does over a manager's cache, workers started once the
//     informer synced (waited for on a channel).
//
// Every reconciler reads the object from its informer's cache without
// copying it (converge: Informer.Get; client-go and controller-runtime:
// the SharedIndexInformer's indexer GetByKey, which is what
// controller-runtime's cache reader does before its DeepCopy, left out here)
// and records it in a recTracker, which is all it does.

const (
	// reconcileObjects is the store's size in the throughput scenario.
	reconcileObjects = 100_000
	// reconcileTimeout bounds every wait of the reconcile scenarios.
	reconcileTimeout = 2 * time.Minute

	// The latency scenario: latencyKeys objects, then latencyWrites updates
	// at latencyRate per second (2 s), cycling over the keys (two updates
	// per key, one second apart), with latencyWorkers workers.
	latencyKeys    = 10_000
	latencyWrites  = 20_000
	latencyRate    = 10_000
	latencyWorkers = 4
)

// reconcileWorkers are the worker counts of the throughput scenario.
var reconcileWorkers = []int{1, 4, 16}

// BenchmarkReconcileThroughput: the store holds 100k objects (written
// before timing); the time from starting the informer and the controller
// until every key has been reconciled at least once (each first reconcile of
// a key counted by a per-key flag; the wait ends on the 100kth distinct key,
// never on a quiet period). One sub-benchmark per pipeline and worker count:
// BenchmarkReconcileThroughput/converge/workers=4. Reports ns/op (per 100k
// drained) and objects/s, the mean over b.N drains, each on a fresh
// informer and controller.
func BenchmarkReconcileThroughput(b *testing.B) {
	for _, im := range recImpls {
		b.Run(im.name, func(b *testing.B) {
			for _, w := range reconcileWorkers {
				b.Run("workers="+strconv.Itoa(w), func(b *testing.B) {
					b.StopTimer()
					o := cachedInformerObjects(reconcileObjects)
					var sum recRun
					for range b.N {
						sum.add(recThroughputOnce(b, im, o, w))
					}
					b.ReportMetric(float64(sum.elapsed.Nanoseconds())/float64(b.N), "ns/op")
					b.ReportMetric(float64(b.N*o.n)/sum.elapsed.Seconds(), "objects/s")
					reportStages(b, sum, b.N)
				})
			}
		})
	}
}

// BenchmarkReconcileThroughput1M is ReconcileThroughput with 1M objects
// and 4 workers, converge and client-go only (its target: ≤ 0.3x client-go):
//
//	go -C bench test -run '^$' -bench BenchmarkReconcileThroughput1M -benchtime 1x -count 3 .
func BenchmarkReconcileThroughput1M(b *testing.B) {
	for _, im := range recImpls {
		if im.name != "converge" && im.name != "client-go" {
			continue
		}
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			o := cachedInformerObjects(1_000_000)
			var sum recRun
			for range b.N {
				sum.add(recThroughputOnce(b, im, o, 4))
			}
			b.ReportMetric(float64(sum.elapsed.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(b.N*o.n)/sum.elapsed.Seconds(), "objects/s")
			reportStages(b, sum, b.N)
		})
	}
}

// BenchmarkReconcileLatency: the store holds 10k objects, all reconciled
// once (not timed); then one writer updates existing keys at a steady 10k
// writes/s for 2 s (20k writes, two per key one second apart, each a new
// object version written at its slot of a precomputed schedule), with 4
// workers. The writer sleeps until its next write is due, then writes
// every write due (clockGaps.sleepUntil): timers here wake about once a
// millisecond, so the writes come about ten at a time, as events do in a
// watch response. A writer that waited by yielding (runtime.Gosched)
// instead kept its processor busy, and the threads of the pipeline it woke
// queued behind it for the CPU: 1.9 s of runq-wait-ms in a 2 s run, and
// maxima of one 4 ms scheduler tick on both pipelines
// (docs/design/steady-latency.md). A version's latency is from just before
// its write (memory Store.Put; FakeWatcher.Modify, a channel send, for the
// SharedIndexInformer) to the start of the first reconcile that read it
// from the cache. The run
// ends once every key's last version has been reconciled. Reports the
// latency percentiles in µs over all b.N runs, the write rate achieved and
// coalesced: versions never seen by a reconcile because a newer one of the
// same key was already cached (expected 0 at this rate).
func BenchmarkReconcileLatency(b *testing.B) {
	o := newInformerObjects(latencyKeys, 0)
	ups := newLatencyUpdates(o, latencyWrites)
	sched := steadySchedule(latencyWrites, latencyRate)
	for _, im := range recImpls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var lat []int64
			var rate float64
			var coalesced int
			var host hostStats
			for range b.N {
				l, r, c, h := recLatencyOnce(b, im, o, ups, sched)
				lat = append(lat, l...)
				rate += r
				coalesced += c
				host = host.add(h)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(rate/float64(b.N), "writes/s")
			reportLatencyMicros(b, lat)
			host.report(b)
			b.ReportMetric(float64(coalesced)/float64(b.N), "coalesced")
		})
	}
}

// recRun is one throughput run's times, or the sum of several: elapsed,
// from the start until every key was reconciled; synced, until the
// pipeline's informer held the whole list in its cache (converge:
// WaitForCache returned; client-go: the informer's HasSyncedChecker, the
// list popped from its queue into the indexer and handed to the
// listeners); first, until the first reconcile started (0 for a pipeline
// that does not tell); and cpu, the CPU time (user + system) the whole
// process used meanwhile; gcs, the garbage collections that ended
// meanwhile (each scans the whole heap, the benchmark's objects included,
// so one more or less moves cpu by tens of ms).
type recRun struct {
	elapsed, synced, first, cpu time.Duration
	gcs                         uint64
}

func (r *recRun) add(o recRun) {
	r.elapsed += o.elapsed
	r.synced += o.synced
	r.first += o.first
	r.cpu += o.cpu
	r.gcs += o.gcs
}

// reportStages reports the mean of n runs' stage times (cached-ms,
// first-ms), CPU time (cpu-ms) and collections (gcs) from their sum.
func reportStages(b *testing.B, sum recRun, n int) {
	b.ReportMetric(float64(sum.synced.Nanoseconds())/1e6/float64(n), "cached-ms")
	b.ReportMetric(float64(sum.first.Nanoseconds())/1e6/float64(n), "first-ms")
	b.ReportMetric(float64(sum.cpu.Nanoseconds())/1e6/float64(n), "cpu-ms")
	b.ReportMetric(float64(sum.gcs)/float64(n), "gcs")
}

// recThroughputOnce runs the throughput scenario once on a fresh pipeline.
func recThroughputOnce(b *testing.B, im recImpl, o *informerObjects, workers int) recRun {
	t := newRecTracker(o, nil)
	p := im.newPipeline(o, t, 0)
	settle()
	gc0, cpu0 := gcCycles(), processCPU()
	start := time.Now()
	t.start = start
	p.start(workers)
	ok := waitOrTimeout(t.done, reconcileTimeout)
	elapsed := time.Since(start)
	cpu, gcs := time.Duration(processCPU()-cpu0), gcCycles()-gc0
	p.stop()
	if !ok {
		b.Fatalf("%s: %d of %d keys reconciled within %v", im.name, t.count.Load(), o.n, reconcileTimeout)
	}
	if err := errors.Join(p.check(), t.check()); err != nil {
		b.Fatalf("%s: %v", im.name, err)
	}
	return recRun{elapsed: elapsed, synced: time.Duration(t.syncedAt.Load()), first: time.Duration(t.firstAt.Load()), cpu: cpu, gcs: gcs}
}

// gcCycles is the number of garbage collections completed so far, read
// without stopping the world (runtime.ReadMemStats would).
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// recLatencyOnce runs the latency scenario once on a fresh pipeline and
// returns the latency of every version reconciled (ns), the write rate
// achieved, how many versions no reconcile saw, and what the host did to
// the process during the writes.
func recLatencyOnce(b *testing.B, im recImpl, o *informerObjects, ups []*benchObj, sched []int64) ([]int64, float64, int, hostStats) {
	t := newRecTracker(o, ups)
	p := im.newPipeline(o, t, len(ups))
	p.start(latencyWorkers)
	if !waitOrTimeout(t.done, reconcileTimeout) {
		p.stop()
		b.Fatalf("%s: %d of %d keys reconciled within %v", im.name, t.count.Load(), o.n, reconcileTimeout)
	}
	settle()
	hw := startHostWatch(b)
	// The schedule starts now, after the initial sync and reconciles; the
	// reconcilers read base only for versions written after this.
	t.base = time.Now()
	base := t.base
	for i, u := range ups {
		hw.gaps.sleepUntil(base, sched[i])
		t.writeAt[i] = int64(time.Since(base))
		p.push(u)
	}
	rate := float64(len(ups)-1) / (float64(t.writeAt[len(ups)-1]-t.writeAt[0]) / 1e9)
	ok := waitOrTimeout(t.latDone, reconcileTimeout)
	p.stop()
	if !ok {
		b.Fatalf("%s: %d keys' last versions not reconciled within %v", im.name, t.remaining.Load(), reconcileTimeout)
	}
	if err := errors.Join(p.check(), t.check()); err != nil {
		b.Fatalf("%s: %v", im.name, err)
	}
	lat := make([]int64, 0, len(ups))
	for g := range ups {
		if at := t.recAt[g].Load(); at != 0 {
			lat = append(lat, at-t.writeAt[g])
		}
	}
	return lat, rate, len(ups) - len(lat), hw.stop(b, repP999(lat))
}

// newLatencyUpdates returns n new versions of o's objects, cycling over
// the keys: update j is version gen j+1 of key j%o.n, a shallow copy with a
// new resourceVersion.
func newLatencyUpdates(o *informerObjects, n int) []*benchObj {
	ups := make([]*benchObj, n)
	for j := range ups {
		u := *o.objs[j%o.n]
		u.ResourceVersion = strconv.Itoa(o.n + j + 1)
		u.Generation = int64(j/o.n) + 2
		u.gen = int32(j + 1)
		ups[j] = &u
	}
	return ups
}

// ---- the tracker ----

// recTracker is what every pipeline's reconciler reports to: the object it
// read from the cache for the key it was given.
type recTracker struct {
	n     int
	seen  []atomic.Bool // by object index: reconciled at least once
	count atomic.Int64  // keys with seen set
	done  chan struct{} // closed when count reaches n
	// calls counts reconciles; misses those that found no object.
	calls, misses atomic.Int64

	// The latency scenario (nil slices otherwise). base is the clock's
	// origin, set by the writer before its first write; writeAt[g-1] is when version g was written, recAt[g-1] when
	// the first reconcile that read it started (0: none yet), both in ns
	// since base. final[i] is the last version written to key i;
	// remaining counts keys whose last version has not been reconciled,
	// and latDone is closed when it reaches 0.
	base      time.Time
	writeAt   []int64
	recAt     []atomic.Int64
	final     []int32
	remaining atomic.Int64
	latDone   chan struct{}
	// early counts reconciles that read a version before the writer had
	// stamped it, which cannot happen: the stamp precedes the write.
	early atomic.Int64

	// The throughput scenario's stages (zero start: not recorded): when,
	// in ns since start, the pipeline's informer had the list cached and
	// the first reconcile started.
	start             time.Time
	syncedAt, firstAt atomic.Int64
}

// synced records that the pipeline's informer has the list cached.
func (t *recTracker) synced() {
	if !t.start.IsZero() {
		t.syncedAt.CompareAndSwap(0, int64(time.Since(t.start)))
	}
}

func newRecTracker(o *informerObjects, ups []*benchObj) *recTracker {
	t := &recTracker{n: o.n, seen: make([]atomic.Bool, o.n), done: make(chan struct{})}
	if ups != nil {
		t.writeAt = make([]int64, len(ups))
		t.recAt = make([]atomic.Int64, len(ups))
		t.final = make([]int32, o.n)
		for _, u := range ups {
			t.final[u.idx] = u.gen
		}
		keys := 0
		for _, g := range t.final {
			if g != 0 {
				keys++
			}
		}
		t.remaining.Store(int64(keys))
		t.latDone = make(chan struct{})
	}
	return t
}

// reconciled records a reconcile that read obj (ok: found) from the cache.
// The clock is read right after the cache read: the reconcile's start, at
// which it holds the version it will act on.
func (t *recTracker) reconciled(obj *benchObj, ok bool) {
	t.calls.Add(1)
	if !ok {
		t.misses.Add(1)
		return
	}
	if t.recAt != nil && obj.gen > 0 {
		at := int64(time.Since(t.base))
		g := obj.gen - 1
		// The writer stamped writeAt[g] before writing the version, and
		// the write happens before any cache read that returns it.
		if at < t.writeAt[g] {
			t.early.Add(1)
		}
		if t.recAt[g].CompareAndSwap(0, at) && obj.gen == t.final[obj.idx] {
			if t.remaining.Add(-1) == 0 {
				close(t.latDone)
			}
		}
	}
	if !t.seen[obj.idx].Load() && t.seen[obj.idx].CompareAndSwap(false, true) {
		switch c := t.count.Add(1); {
		case c == int64(t.n):
			close(t.done)
			fallthrough
		case c == 1 && !t.start.IsZero():
			t.firstAt.CompareAndSwap(0, int64(time.Since(t.start)))
		}
	}
}

// check reports reconciles that found no object, or saw impossible times.
func (t *recTracker) check() error {
	if m := t.misses.Load(); m != 0 {
		return fmt.Errorf("%d of %d reconciles found no object in the cache", m, t.calls.Load())
	}
	if e := t.early.Load(); e != 0 {
		return fmt.Errorf("%d reconciles read a version before it was written", e)
	}
	return nil
}

// ---- the pipelines ----

// recPipeline is a store holding the scenario's objects, an informer
// following it and a controller whose no-op reconciler reports to a
// recTracker.
type recPipeline interface {
	// start creates and runs the informer and the controller with workers
	// workers; it returns at once.
	start(workers int)
	// push writes an update through the store.
	push(u *benchObj)
	// stop stops the controller and the informer and waits for every
	// goroutine they started.
	stop()
	// check reports anything unexpected, such as a relist; after stop.
	check() error
}

// recImpl is one pipeline under test.
type recImpl struct {
	name string
	// newPipeline builds the store holding o's objects (not timed), with
	// room for updates writes, reporting to t.
	newPipeline func(o *informerObjects, t *recTracker, updates int) recPipeline
}

// recImpls run in this order; reconcile_controllerruntime_test.go appends
// controller-runtime.
var recImpls = []recImpl{
	{name: "converge", newPipeline: newConvergeRec},
	{name: "client-go", newPipeline: newClientGoRec},
}

// convergeRec: a Source (memstore.Store; chanSource in the burst's
// diagnostic row) →
// informer.Informer (default options) →
// reconcile.Controller (For, WithWorkers; default options otherwise: no
// metrics, the default rate limiter and logger).
type convergeRec struct {
	o   *informerObjects
	t   *recTracker
	src informer.Source[string, *benchObj]
	// pushFn writes an update to src; srcCheck reports a fault of src's
	// (nil: none to check).
	pushFn   func(u *benchObj)
	srcCheck func() error
	// infOpts are the informer's options (none: its defaults).
	infOpts []informer.Option
	inf     *informer.Informer[string, *benchObj]
	// The controller stops first, then the informer, as a Manager does.
	stopCtl, stopInf context.CancelFunc
	ctlDone, infDone chan struct{}
	runErr           error          // of the controller's Run; read after ctlDone
	syncWait         sync.WaitGroup // the goroutine that notes the informer's sync
}

// newConvergeRec is convergeRec over a memstore.Store holding o's objects,
// whose history holds updates writes beyond them (at least its default),
// so that a watch behind a burst of them never expires into a relist.
func newConvergeRec(o *informerObjects, t *recTracker, updates int) recPipeline {
	s := must.Do(memstore.New[string, *benchObj](memstore.WithHistory(max(memstore.DefaultHistory, updates))))
	for i, k := range o.keys {
		s.Put(k, o.objs[i])
	}
	return &convergeRec{o: o, t: t, src: s, pushFn: func(u *benchObj) { s.Put(o.keys[u.idx], u) }}
}

func (p *convergeRec) start(workers int) {
	p.inf = must.Do(informer.New("bench", p.src, p.infOpts...))
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		v, ok := p.inf.Get(key)
		p.t.reconciled(v, ok)
		return reconcile.Result{}, nil
	})
	opts := append([]reconcile.Option{reconcile.For(p.inf), reconcile.WithWorkers(workers)}, recTriggerOptions()...)
	c, err := reconcile.New("bench", rec, opts...)
	if err != nil {
		panic(err)
	}
	infCtx, stopInf := context.WithCancel(context.Background())
	ctlCtx, stopCtl := context.WithCancel(context.Background())
	p.stopInf, p.stopCtl = stopInf, stopCtl
	p.infDone, p.ctlDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.infDone)
		_ = p.inf.Run(infCtx)
	}()
	go func() {
		defer close(p.ctlDone)
		p.runErr = c.Run(ctlCtx)
	}()
	p.syncWait.Go(func() {
		if p.inf.WaitForCache(infCtx) == nil {
			p.t.synced()
		}
	})
}

func (p *convergeRec) push(u *benchObj) { p.pushFn(u) }

func (p *convergeRec) stop() {
	p.stopCtl()
	<-p.ctlDone
	p.stopInf()
	<-p.infDone
	p.syncWait.Wait()
}

func (p *convergeRec) check() error {
	if p.runErr != nil {
		return fmt.Errorf("controller: %w", p.runErr)
	}
	if p.srcCheck != nil {
		if err := p.srcCheck(); err != nil {
			return err
		}
	}
	return listedOnce(p.inf.Stats())
}

// clientGoRec: sharedInformer → a handler queueing namespace/name keys →
// client-go's rate-limiting workqueue → N workers, the loop of client-go's
// sample-controller.
type clientGoRec struct {
	*sharedInformer
	t *recTracker
	q Queue
	// The workers stop first, then the informer.
	stopCtl, stopInf context.CancelFunc
	workers          sync.WaitGroup // the sync waiter and the workers
	infDone          chan struct{}
}

func newClientGoRec(o *informerObjects, t *recTracker, updates int) recPipeline {
	return &clientGoRec{sharedInformer: newSharedInformer(o, updates), t: t}
}

func (p *clientGoRec) start(workers int) {
	p.q = newClientGo("", nil)
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			panic(err)
		}
		p.q.Add(key)
	}
	reg, err := p.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		panic(err)
	}
	infCtx, stopInf := context.WithCancel(context.Background())
	ctlCtx, stopCtl := context.WithCancel(context.Background())
	p.stopInf, p.stopCtl = stopInf, stopCtl
	p.infDone = make(chan struct{})
	go func() {
		defer close(p.infDone)
		p.inf.RunWithContext(infCtx)
	}()
	p.workers.Go(func() {
		for i, c := range []cache.DoneChecker{p.inf.HasSyncedChecker(), reg.HasSyncedChecker()} {
			select {
			case <-c.Done():
			case <-ctlCtx.Done():
				return
			}
			if i == 0 {
				p.t.synced()
			}
		}
		for range workers {
			p.workers.Go(p.work)
		}
	})
}

func (p *clientGoRec) work() {
	for {
		key, shutdown := p.q.Get()
		if shutdown {
			return
		}
		p.t.reconciled(p.get(key))
		p.q.Forget(key)
		p.q.Done(key)
	}
}

func (p *clientGoRec) stop() {
	p.stopCtl()
	p.q.ShutDown()
	p.workers.Wait()
	p.stopInf()
	<-p.infDone
}

// TestReconcilePipelines runs both scenarios' code on a small store for
// every pipeline: every key reconciled, every key's last version seen, no
// reconcile without an object, no relist, no goroutine left behind.
func TestReconcilePipelines(t *testing.T) {
	const n, writes = 2000, 5000
	o := newInformerObjects(n, 0)
	ups := newLatencyUpdates(o, writes)
	before := runtime.NumGoroutine()
	for _, im := range recImpls {
		for _, w := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/workers=%d", im.name, w), func(t *testing.T) {
				tr := newRecTracker(o, ups)
				p := im.newPipeline(o, tr, writes)
				p.start(w)
				if !waitOrTimeout(tr.done, time.Minute) {
					p.stop()
					t.Fatalf("%d of %d keys reconciled", tr.count.Load(), n)
				}
				tr.base = time.Now()
				for i, u := range ups {
					tr.writeAt[i] = int64(time.Since(tr.base))
					p.push(u)
				}
				ok := waitOrTimeout(tr.latDone, time.Minute)
				p.stop()
				if !ok {
					t.Fatalf("%d keys' last versions not reconciled", tr.remaining.Load())
				}
				if err := errors.Join(p.check(), tr.check()); err != nil {
					t.Fatal(err)
				}
				if c := tr.calls.Load(); c < n+int64(n) {
					t.Fatalf("%d reconciles, want at least %d", c, 2*n)
				}
				for i := range n {
					if tr.final[i] == 0 || tr.recAt[tr.final[i]-1].Load() == 0 {
						t.Fatalf("key %d: last version %d not reconciled", i, tr.final[i])
					}
				}
			})
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Fatalf("%d goroutines left behind", g-before)
	}
}
