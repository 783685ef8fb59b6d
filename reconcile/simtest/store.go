package simtest

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
)

// Wrap returns store as process p sees it. Reads (Get) pass through: the
// store is the truth. Every Create, Update and Delete is a numbered write
// of the run, at which the schedule may crash p (after the write commits,
// so the store holds it and the process never learns it did), panic, or
// report a timeout. Writes of a crashed process fail with ErrCrashed and
// write nothing. List and Watch, what informers follow, are served as the
// schedule says: behind the store after a stale restart, and through
// informer/faults for coalescing, duplicates and expiries. Give the
// wrapper to informers and reconcilers alike; write the workload to the
// raw store.
func Wrap[K comparable, V any](p *Process, name string, store *memstore.Store[K, V]) informer.Store[K, V] {
	w := &wrapped[K, V]{Store: store, p: p, name: name}
	w.src = &lagging[K, V]{store: store, p: p}
	if s := p.run.sched; s.sourceFaults() {
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		rates := faults.Rates{Duplicate: s.Duplicate, Expire: s.Expire}
		if s.Coalesce > 0 {
			rates.Coalesce, rates.CoalesceWindow = 1, s.Coalesce
		}
		// One seed per store and incarnation, all from the schedule's:
		// the run's one fault injector is informer/faults.
		f, err := faults.New[K, V](w.src, s.Seed^h.Sum64()+uint64(p.incarnation), faults.WithRates(rates))
		if err != nil {
			// The schedule's rates are simtest's own, drawn in [0, 1].
			panic(fmt.Sprintf("simtest.Wrap(%q): %v", name, err))
		}
		p.run.addSource(f)
		w.src = f
	}
	return w
}

type wrapped[K comparable, V any] struct {
	*memstore.Store[K, V]
	p    *Process
	name string
	src  informer.Source[K, V]
}

// Compile-time proof that the wrapper is a Store.
var _ informer.Store[string, int] = (*wrapped[string, int])(nil)

// List passes the run's gate first, so that two informers listing at once
// hand their entries to the controllers in store order.
func (s *wrapped[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if err := s.p.run.gate.wait(ctx, fmt.Sprintf("0 list %s %d", s.name, s.p.incarnation)); err != nil {
		return nil, 0, err
	}
	return s.src.List(ctx)
}

// Watch sends each event through the run's gate: one at a time, in
// store, revision and key order.
func (s *wrapped[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	return s.src.Watch(ctx, after, func(ev informer.Event[K, V]) error {
		order := fmt.Sprintf("0 event %s %d %020d %v", s.name, s.p.incarnation, ev.Revision, ev.Key)
		if err := s.p.run.gate.wait(ctx, order); err != nil {
			return err
		}
		return emit(ev)
	})
}

func (s *wrapped[K, V]) Create(ctx context.Context, key K, v V) (informer.Revision, error) {
	return s.write(ctx, "Create", key, func() (informer.Revision, error) { return s.Store.Create(ctx, key, v) })
}

func (s *wrapped[K, V]) Update(ctx context.Context, key K, v V, rev informer.Revision) (informer.Revision, error) {
	return s.write(ctx, "Update", key, func() (informer.Revision, error) { return s.Store.Update(ctx, key, v, rev) })
}

func (s *wrapped[K, V]) Delete(ctx context.Context, key K, rev informer.Revision) (informer.Revision, error) {
	return s.write(ctx, "Delete", key, func() (informer.Revision, error) { return s.Store.Delete(ctx, key, rev) })
}

// write is the hook every store write goes through.
func (s *wrapped[K, V]) write(ctx context.Context, op string, key K, do func() (informer.Revision, error)) (informer.Revision, error) {
	object := fmt.Sprintf("%s/%v", s.name, key)
	return hook(s.p, ctx, op+" "+object, object, do)
}

// Effect runs do, an action on something outside the world's stores (a
// cloud API, a process to start), as a numbered write of the run: a dead
// process's effect fails with ErrCrashed and does nothing, and the
// schedule's fault at it comes after do has acted, as for a store write.
// what names it in a failure report ("start pod a-1"). Do not count a
// store write twice: Wrap's writes are counted already.
func (p *Process) Effect(ctx context.Context, what string, do func(ctx context.Context) error) error {
	_, err := hook(p, ctx, what, what, func() (struct{}, error) { return struct{}{}, do(ctx) })
	return err
}

// hook numbers a write of object, what in a report, records it for the
// report, and applies the schedule's fault at it.
func hook[R any](p *Process, ctx context.Context, what, object string, do func() (R, error)) (R, error) {
	var zero R
	p.lock()
	defer p.unlock()
	if p.dead.Load() {
		return zero, ErrCrashed
	}
	p.run.begin()
	defer p.run.end()
	who, _ := ctx.Value(reconcilingKey{}).(string)
	rec := writeRecord{what: what, object: object, by: who, incarnation: p.incarnation,
		late: p.deposed.Load(), stale: p.lag > 0 && time.Now().Before(p.staleUntil)}
	if outcome, ok := p.run.deposeNext(rec); ok {
		// Frozen before the write: the driver starts a successor, and lets
		// the write go when it has taken over. The process's context is
		// still live (its clock was frozen too), so the write is made as
		// the process decided it, for the old term.
		release := make(chan struct{})
		p.deposed.Store(true)
		p.freeze()
		p.run.crashed <- crash{p: p, release: release}
		<-release
		r, err := do()
		outcome(err)
		return r, err
	}
	r, err := do()
	rec.err = err
	n, fault, over := p.run.wrote(rec)
	if over {
		p.kill()
		return zero, ErrCrashed
	}
	switch {
	case fault == nil:
		return r, err
	case fault.Kind == Crash || fault.Kind == Stale:
		p.crash(fault.Arg)
		return zero, fmt.Errorf("%w after write %d", ErrCrashed, n)
	case fault.Kind == Panic && who == "":
		// Outside a reconcile nothing recovers a panic: the process dies.
		p.crash(0)
		return zero, fmt.Errorf("%w after write %d", ErrCrashed, n)
	case fault.Kind == Panic:
		panic(fmt.Sprintf("simtest: panic injected after write %d", n))
	default: // Ambiguous
		return zero, fmt.Errorf("simtest: write %d timed out (it committed): %w", n, context.DeadlineExceeded)
	}
}

// lagging is what a process's informers list and watch: the store itself,
// or, for StaleFor after a stale restart, the store as it was lag
// revisions ago, with no change sent until that time is up (a replica
// that has fallen behind, then catches up).
type lagging[K comparable, V any] struct {
	store *memstore.Store[K, V]
	p     *Process
	// at is the revision the replica is stuck at, fixed by the first List
	// of the window: a relist is no reason for it to move.
	mu    sync.Mutex
	at    informer.Revision
	fixed bool
}

func (l *lagging[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if l.p.lag == 0 || !time.Now().Before(l.p.staleUntil) {
		return l.store.List(ctx)
	}
	l.mu.Lock()
	if !l.fixed {
		rev := l.store.Revision()
		l.at, l.fixed = rev-min(rev, informer.Revision(l.p.lag)), true
	}
	at := l.at
	l.mu.Unlock()
	es, err := l.store.ListAt(ctx, at)
	return es, at, err
}

func (l *lagging[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	if d := time.Until(l.p.staleUntil); l.p.lag > 0 && d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return l.store.Watch(ctx, after, emit)
}
