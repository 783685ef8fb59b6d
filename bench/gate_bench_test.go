package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// The read-your-writes gate's cost (docs/design/store-api.md, Measured): a
// parent/child controller, For(parents) and Owns(children) mapping each
// child back to its parent, whose reconcile reads its parent from the
// cache, creates its child if the child informer does not show one, or
// else updates it (read from the store, compare-and-swap) to the parent's
// version, and, with the gate, records each write with reconcile.Wrote.
// The timing follows the latency scenario (12): gateParents parents are
// written twice and reconciled (not timed: the warm-up, where children are
// created), then one writer updates them at a steady
// gateRate writes/s, gateWrites in all, cycling over the parents; a
// version's latency is from just before its write to the start of the
// first reconcile that read it. The helpers are scenario 12's
// (steadySchedule, waitUntil, reportLatencyMicros); its pipeline follows
// one informer, so this one is its own.
const (
	gateParents = 1000
	gateWrites  = 10_000
	gateRate    = 5000
	gateWorkers = 4
)

// gateVariant is one sub-benchmark: whether reconciles call Wrote, and
// whether the child informer lags (one child event in ten delayed up to
// lagDelay by informer/faults, holding back the events after it).
type gateVariant struct {
	name       string
	gate, lags bool
}

const lagDelay = 2 * time.Millisecond

var gateVariants = []gateVariant{
	{name: "nogate"},
	{name: "gate", gate: true},
	{name: "lagging", gate: true, lags: true},
	{name: "lagging-nogate", lags: true},
}

// BenchmarkReadYourWrites reports write→reconcile p50/p99/p999 (µs), the
// writes/s achieved, reconciles/s over the timed phase, and over the whole
// run (the warm-up creates every child at full speed, where a lagging
// informer matters most) skips (reconciles the gate deferred) and
// dup-creates (creates that found the child already there: a reconcile
// acted on a view without its own earlier create), each the mean per run. Target: gate/nogate ≤ 1.10 on latency and
// throughput; dup-creates 0 with the gate, also when the informer lags.
func BenchmarkReadYourWrites(b *testing.B) {
	for _, v := range gateVariants {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			var lat []int64
			var rate, recs, skips, dups float64
			for range b.N {
				r := gateRunOnce(b, v)
				lat = append(lat, r.lat...)
				rate += r.rate
				recs += r.recRate
				skips += r.skips
				dups += float64(r.dups)
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(rate/n, "writes/s")
			b.ReportMetric(recs/n, "reconciles/s")
			reportLatencyMicros(b, lat)
			b.ReportMetric(skips/n, "skips")
			b.ReportMetric(dups/n, "dup-creates")
		})
	}
}

type gateResult struct {
	lat           []int64
	rate, recRate float64
	skips         float64
	dups          int64
}

// gatePipeline is one run's stores, informers and controller.
type gatePipeline struct {
	v         gateVariant
	parents   *memstore.Store[string, int]
	children  *memstore.Store[string, int]
	parentInf *informer.Informer[string, int]
	childInf  *informer.Informer[string, int]
	keys      []string

	calls, dups atomic.Int64
	// created counts parents whose child the informer showed, for the
	// untimed warm-up; warm is closed when it reaches gateParents.
	created atomic.Int64
	seen    []atomic.Bool
	warm    chan struct{}

	// The timed phase, as recTracker's: writeAt[g-1] and recAt[g-1] in ns
	// since base for version g; final[i] is parent i's last version.
	base      time.Time
	writeAt   []int64
	recAt     []atomic.Int64
	final     []int
	remaining atomic.Int64
	latDone   chan struct{}
}

func (p *gatePipeline) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	v, ok := p.parentInf.Get(key)
	if !ok {
		return reconcile.Result{}, nil
	}
	p.calls.Add(1)
	idx := parentIndex(key)
	if v > 0 && p.recAt[v-1].Load() == 0 {
		at := int64(time.Since(p.base))
		if p.recAt[v-1].CompareAndSwap(0, at) && v == p.final[idx] && p.remaining.Add(-1) == 0 {
			close(p.latDone)
		}
	}
	if _, ok := p.childInf.Get(key); !ok {
		rev, err := p.children.Create(ctx, key, v)
		if errors.Is(err, informer.ErrConflict) {
			p.dups.Add(1)
			return reconcile.Result{}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		p.wrote(ctx, rev)
		return reconcile.Result{}, nil
	}
	if !p.seen[idx].Load() && p.seen[idx].CompareAndSwap(false, true) && p.created.Add(1) == gateParents {
		close(p.warm)
	}
	cur, rev, ok, err := p.children.Get(ctx, key)
	if err != nil || !ok || cur == v {
		return reconcile.Result{}, err
	}
	rev, err = p.children.Update(ctx, key, v, rev)
	if err != nil {
		return reconcile.Result{}, err
	}
	p.wrote(ctx, rev)
	return reconcile.Result{}, nil
}

func (p *gatePipeline) wrote(ctx context.Context, rev informer.Revision) {
	if p.v.gate {
		reconcile.Wrote(ctx, p.childInf, rev)
	}
}

func parentIndex(key string) int {
	var i int
	_, _ = fmt.Sscanf(key, "parent-%d", &i)
	return i
}

// gateRunOnce runs one variant on a fresh pipeline.
func gateRunOnce(tb testing.TB, v gateVariant) gateResult {
	p := &gatePipeline{
		v: v, parents: must.Do(memstore.New[string, int]()), children: must.Do(memstore.New[string, int]()),
		keys: make([]string, gateParents), seen: make([]atomic.Bool, gateParents), warm: make(chan struct{}),
		writeAt: make([]int64, gateWrites), recAt: make([]atomic.Int64, gateWrites),
		final: make([]int, gateParents), latDone: make(chan struct{}),
	}
	for i := range p.keys {
		p.keys[i] = fmt.Sprintf("parent-%d", i)
		p.parents.Put(p.keys[i], 0)
	}
	for j := range gateWrites {
		p.final[j%gateParents] = j + 1
	}
	p.remaining.Store(gateParents)
	quietLog := informer.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var childSrc informer.Source[string, int] = p.children
	if v.lags {
		childSrc = must.Do(faults.New[string, int](p.children, 1, faults.WithRates(faults.Rates{Delay: 0.1, MaxDelay: lagDelay})))
	}
	p.parentInf = must.Do(informer.New("parents", informer.Source[string, int](p.parents), quietLog))
	p.childInf = must.Do(informer.New("children", childSrc, quietLog))
	reg := newGateRegistry()
	c, err := reconcile.New("gate", p, reconcile.For(p.parentInf),
		reconcile.Owns(p.childInf, func(key string, _ int) (string, bool) { return key, true }),
		reconcile.WithWorkers(gateWorkers), reconcile.WithMetrics(reg),
		reconcile.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{p.parentInf.Run, p.childInf.Run, c.Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	stop := func() { cancel(); wg.Wait() }
	// Each parent written again at once: its second reconcile then
	// usually comes before the child informer has the child its first one
	// created, which is what the gate is for.
	if err := p.parentInf.WaitForSync(ctx); err != nil {
		stop()
		tb.Fatal(err)
	}
	for _, k := range p.keys {
		p.parents.Put(k, 0)
	}
	if !waitOrTimeout(p.warm, reconcileTimeout) {
		stop()
		tb.Fatalf("%s: %d of %d children seen within %v", v.name, p.created.Load(), gateParents, reconcileTimeout)
	}
	settle()
	calls0 := p.calls.Load()
	sched := steadySchedule(gateWrites, gateRate)
	p.base = time.Now()
	for j := range gateWrites {
		waitUntil(p.base, sched[j])
		p.writeAt[j] = int64(time.Since(p.base))
		p.parents.Put(p.keys[j%gateParents], j+1)
	}
	rate := float64(gateWrites-1) / (float64(p.writeAt[gateWrites-1]-p.writeAt[0]) / 1e9)
	ok := waitOrTimeout(p.latDone, reconcileTimeout)
	elapsed := time.Since(p.base)
	stop()
	if !ok {
		tb.Fatalf("%s: %d parents' last versions not reconciled within %v", v.name, p.remaining.Load(), reconcileTimeout)
	}
	lat := make([]int64, 0, gateWrites)
	for g := range gateWrites {
		if at := p.recAt[g].Load(); at != 0 {
			lat = append(lat, at-p.writeAt[g])
		}
	}
	return gateResult{
		lat: lat, rate: rate, recRate: float64(p.calls.Load()-calls0) / elapsed.Seconds(),
		skips: reg.skips(), dups: p.dups.Load(),
	}
}

// TestReadYourWritesScenario runs every variant once: the last versions
// reconciled, and no duplicate create with the gate, lagging or not.
func TestReadYourWritesScenario(t *testing.T) {
	for _, v := range gateVariants {
		t.Run(v.name, func(t *testing.T) {
			r := gateRunOnce(t, v)
			if v.gate && r.dups != 0 {
				t.Fatalf("%d duplicate creates with the gate", r.dups)
			}
			if !v.gate && r.skips != 0 {
				t.Fatalf("%v skips without the gate", r.skips)
			}
		})
	}
}

// gateRegistry reads the controller's skip counter.
type gateRegistry struct{ *prometheus.Registry }

func newGateRegistry() gateRegistry { return gateRegistry{prometheus.NewRegistry()} }

func (r gateRegistry) skips() float64 {
	mfs, err := r.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "converge_read_your_writes_skips_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
