package bench

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/converge-go/converge/informer"
)

// The update burst: burstKeys objects, listed and
// reconciled once (not timed); then burstWrites updates (20 new versions of
// every key, cycling over the keys) are pushed as fast as the pipeline
// takes them, on the benchmark's goroutine, with burstWorkers workers.
// Timed from the first push until the final version of every key has been
// reconciled (drain-ms); push-ms is how long the pushes took (a full watch
// channel holds the pusher up, so it measures the front end), and
// reconciles/event how many reconciles the updates caused (coalescing
// lowers it; client-go's workqueue and converge's queue both dedup a key
// that is waiting).
//
// converge is fed through memstore, the store a user's program starts
// with: the pushes are its Puts, which no watch holds up (its history holds
// every update, so the informer never falls behind it into a relist).
// client-go is fed the same prebuilt objects through its fake ListWatch
// with watch.NewFakeWithChanSize(burstChan) (sharedInformer), whose full
// channel holds the pusher up. converge-chan is a diagnostic, judged by no
// target: converge over chanSource, a plain Source whose Watch reads the
// same kind of channel, one emit per object, so that both front ends take
// the same feed. Neither side has an index. The reconcilers read the object
// from the cache, as in the other controller scenarios.
//
//	go -C bench test -run '^$' -bench BenchmarkReconcileBurst -benchtime 1x -count 5 .
const (
	burstKeys    = 10_000
	burstWrites  = 200_000
	burstWorkers = 4
	burstChan    = 1024
)

// burstImpls: the judged rows (converge through memstore, client-go), then
// the diagnostic converge-chan.
var burstImpls = []recImpl{
	{name: "converge", newPipeline: func(o *informerObjects, t *recTracker, _ int) recPipeline {
		return newConvergeRec(o, t, burstWrites)
	}},
	{name: "client-go", newPipeline: newClientGoRec},
	{name: "converge-chan", newPipeline: newConvergeChanRec},
}

// BenchmarkReconcileBurst runs the update burst; see burstKeys.
func BenchmarkReconcileBurst(b *testing.B) {
	o := newInformerObjects(burstKeys, 0)
	ups := newLatencyUpdates(o, burstWrites)
	for _, im := range burstImpls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var drain, push time.Duration
			var recs int64
			for range b.N {
				d, p, r := burstOnce(b, im, o, ups)
				drain, push, recs = drain+d, push+p, recs+r
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(drain.Milliseconds())/n, "drain-ms")
			b.ReportMetric(float64(push.Milliseconds())/n, "push-ms")
			b.ReportMetric(float64(recs)/n/float64(len(ups)), "reconciles/event")
		})
	}
}

// burstOnce runs the burst once on a fresh pipeline: the drain time, the
// push time and the number of reconciles the updates caused.
func burstOnce(b testing.TB, im recImpl, o *informerObjects, ups []*benchObj) (drain, push time.Duration, recs int64) {
	t := newRecTracker(o, ups)
	p := im.newPipeline(o, t, burstChan)
	p.start(burstWorkers)
	if !waitOrTimeout(t.done, reconcileTimeout) {
		p.stop()
		b.Fatalf("%s: %d of %d keys reconciled within %v", im.name, t.count.Load(), o.n, reconcileTimeout)
	}
	settle()
	before := t.calls.Load()
	t.base = time.Now() // writeAt stays 0: every version counts as written at the start
	start := time.Now()
	for _, u := range ups {
		p.push(u)
	}
	push = time.Since(start)
	ok := waitOrTimeout(t.latDone, reconcileTimeout)
	drain = time.Since(start)
	recs = t.calls.Load() - before
	p.stop()
	if !ok {
		b.Fatalf("%s: %d keys' last versions not reconciled within %v", im.name, t.remaining.Load(), reconcileTimeout)
	}
	if err := errors.Join(p.check(), t.check()); err != nil {
		b.Fatalf("%s: %v", im.name, err)
	}
	return drain, push, recs
}

// chanSource is a Source over a prebuilt list and a watch channel, the
// counterpart of sharedInformer's fake ListWatch: List hands out the list's
// objects (no copy) under their keys at revision n; Watch emits a Put per
// object received, at the revision its resourceVersion holds (as a
// reflector reads it from the object). It cannot resume a watch.
type chanSource struct {
	o       *informerObjects
	ch      chan *benchObj
	watches int
}

func newChanSource(o *informerObjects, size int) *chanSource {
	return &chanSource{o: o, ch: make(chan *benchObj, size)}
}

func (s *chanSource) List(context.Context) ([]informer.Entry[string, *benchObj], informer.Revision, error) {
	entries := make([]informer.Entry[string, *benchObj], len(s.o.objs))
	for i, obj := range s.o.objs {
		entries[i] = informer.Entry[string, *benchObj]{Key: obj.Namespace + "/" + obj.Name, Value: obj}
	}
	return entries, informer.Revision(s.o.n), nil
}

func (s *chanSource) event(obj *benchObj) (informer.Event[string, *benchObj], error) {
	rev, err := strconv.ParseUint(obj.ResourceVersion, 10, 64)
	return informer.Event[string, *benchObj]{Type: informer.Put, Key: s.o.keys[obj.idx], Value: obj, Revision: informer.Revision(rev)}, err
}

// Watch emits a Put per object received, one at a time, as a store's
// watch does.
func (s *chanSource) Watch(ctx context.Context, _ informer.Revision, emit func(informer.Event[string, *benchObj]) error) error {
	if s.watches++; s.watches > 1 {
		return errors.New("bench: the channel source cannot be resumed")
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case obj := <-s.ch:
			ev, err := s.event(obj)
			if err != nil {
				return err
			}
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
}

// newConvergeChanRec is convergeRec over a chanSource of size slots.
func newConvergeChanRec(o *informerObjects, t *recTracker, size int) recPipeline {
	s := newChanSource(o, size)
	return &convergeRec{o: o, t: t, src: s, pushFn: func(u *benchObj) { s.ch <- u }, srcCheck: func() error {
		if s.watches != 1 {
			return errors.New("bench: the channel source was watched more than once")
		}
		return nil
	}}
}

// TestReconcileBurstPipelines runs the burst's code on a small store for
// every pipeline: every key's final version reconciled, no reconcile
// without an object, no restarted watch, no goroutine left behind.
func TestReconcileBurstPipelines(t *testing.T) {
	o := newInformerObjects(500, 0)
	ups := newLatencyUpdates(o, 5000)
	for _, im := range burstImpls {
		t.Run(im.name, func(t *testing.T) {
			_, _, recs := burstOnce(t, im, o, ups)
			if recs < int64(o.n) || recs > int64(len(ups)) {
				t.Errorf("%d reconciles for %d updates of %d keys", recs, len(ups), o.n)
			}
		})
	}
}
