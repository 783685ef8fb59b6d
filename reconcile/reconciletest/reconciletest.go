// Package reconciletest runs controllers in a test against the memory store
// with a fake clock, and waits until they have settled, so that a test can
// assert the converged state without sleeping:
//
//	h := reconciletest.New(t)
//	store := memory.New[string, Spec]()
//	inf := reconciletest.Informer(h, "specs", store)
//	reconciletest.Controller(h, "specs", myReconciler, reconcile.For(inf))
//	store.Put("a", Spec{...})
//	h.Settle()           // every write reconciled, nothing left to do now
//	h.Step(time.Minute)  // fire requeues and backoffs due within a minute
//
// Everything the harness starts stops when the test ends; a Run that failed
// fails the test.
package reconciletest

import (
	"context"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memory"
	"github.com/converge-go/converge/reconcile"
)

// SettleTimeout is how long Settle waits, in real time, before it fails the
// test: long enough for a slow CI machine, short enough to name a stuck
// controller before the test binary's own timeout.
var SettleTimeout = 30 * time.Second

// Harness owns a fake clock, the informers and controllers started on it,
// and a context cancelled when the test ends.
type Harness struct {
	// Clock is the fake clock every informer and controller of the harness
	// uses. Step it with Step, which also settles.
	Clock *clocktesting.FakeClock

	t      testing.TB
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Informers run on their own context, cancelled after everything else
	// has returned, so that no controller runs against a stopped cache.
	infCtx    context.Context
	infCancel context.CancelFunc
	infWG     sync.WaitGroup

	mu sync.Mutex
	// caughtUp has one check per informer: it has applied every write its
	// store has made. idle has one check per controller.
	caughtUp []func() bool
	idle     []func() bool
	revs     []func() informer.Revision
}

// New returns a harness whose clock starts at a fixed instant. When the test
// ends it cancels everything it started and waits for it to return.
func New(t testing.TB) *Harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	infCtx, infCancel := context.WithCancel(context.Background())
	h := &Harness{
		Clock:     clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		t:         t,
		ctx:       ctx,
		cancel:    cancel,
		infCtx:    infCtx,
		infCancel: infCancel,
	}
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
		infCancel()
		h.infWG.Wait()
	})
	return h
}

// Context returns a context that is cancelled when the test ends.
func (h *Harness) Context() context.Context { return h.ctx }

// Go runs fn until the test ends; an error from it other than at the end
// fails the test.
func (h *Harness) Go(name string, fn func(ctx context.Context) error) {
	h.wg.Go(func() {
		if err := fn(h.ctx); err != nil && h.ctx.Err() == nil {
			h.t.Errorf("reconciletest: %s: %v", name, err)
		}
	})
}

// Informer starts an informer over store, on the harness's clock, and
// returns it. Settle waits until it has applied every write to store.
func Informer[K comparable, V any](h *Harness, name string, store *memory.Store[K, V], opts ...informer.Option) *informer.Informer[K, V] {
	h.t.Helper()
	inf := informer.New(name, store, append([]informer.Option{informer.WithClock(h.Clock)}, opts...)...)
	h.mu.Lock()
	h.revs = append(h.revs, func() informer.Revision { return store.Revision() })
	h.caughtUp = append(h.caughtUp, func() bool {
		return inf.HasSynced() && inf.LastRevision() >= store.Revision()
	})
	h.mu.Unlock()
	h.infWG.Go(func() {
		if err := inf.Run(h.infCtx); err != nil {
			h.t.Errorf("reconciletest: informer %s: %v", name, err)
		}
	})
	return inf
}

// Controller creates a controller on the harness's clock, with no shutdown
// grace, starts it, and returns it. Settle waits until it is idle.
// A bad option fails the test at once.
func Controller[K comparable](h *Harness, name string, rec reconcile.Reconciler[K], opts ...reconcile.Option) *reconcile.Controller[K] {
	h.t.Helper()
	all := append([]reconcile.Option{reconcile.WithClock(h.Clock), reconcile.WithShutdownGrace(0)}, opts...)
	c, err := reconcile.New(name, rec, all...)
	if err != nil {
		h.t.Fatalf("reconciletest: %v", err)
	}
	h.mu.Lock()
	h.idle = append(h.idle, c.Idle)
	h.mu.Unlock()
	h.Go("controller "+name, c.Run)
	return c
}

// Settle waits until every informer of the harness has applied every write
// to its store, every controller is idle (see Controller.Idle), and the
// stores did not change while it checked: the system has converged as far as
// it can without the clock moving. It fails the test after SettleTimeout.
func (h *Harness) Settle() {
	h.t.Helper()
	deadline := time.Now().Add(SettleTimeout)
	for stable := 0; stable < 2; {
		if time.Now().After(deadline) {
			h.t.Fatalf("reconciletest: not settled after %v: a controller keeps working or is stuck", SettleTimeout)
		}
		if h.settledOnce() {
			stable++
		} else {
			stable = 0
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// settledOnce checks once: store revisions before, informers caught up,
// controllers idle, store revisions unchanged after.
func (h *Harness) settledOnce() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	before := make([]informer.Revision, len(h.revs))
	for i, rev := range h.revs {
		before[i] = rev()
	}
	for _, ok := range h.caughtUp {
		if !ok() {
			return false
		}
	}
	for _, ok := range h.idle {
		if !ok() {
			return false
		}
	}
	for i, rev := range h.revs {
		if rev() != before[i] {
			return false
		}
	}
	return true
}

// Step advances the clock by d, firing every delay due by then (requeues,
// backoffs, timeouts), and settles. To cross several delays in order, step in
// smaller increments.
func (h *Harness) Step(d time.Duration) {
	h.t.Helper()
	h.Clock.Step(d)
	h.Settle()
}
