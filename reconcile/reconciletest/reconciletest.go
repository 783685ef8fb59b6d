// Package reconciletest runs controllers in a test against the memory store
// with a fake clock, and waits until they have settled, so that a test can
// assert the converged state, and how many reconciles it took, without
// sleeping:
//
//	h := reconciletest.New(t)
//	store := memstore.New[string, Spec]()
//	inf := reconciletest.Informer(h, "specs", store)
//	reconciletest.Controller(h, "specs", myReconciler, reconcile.For(inf))
//	store.Put("a", Spec{...})
//	h.Settle()           // every write reconciled, nothing left to do now
//	h.Step(time.Minute)  // fire requeues and backoffs due within a minute
//
// Everything the harness starts stops when the test ends; a Run that failed
// fails the test. Controllers and informers log to the test's output
// (t.Output) unless given a logger of their own.
//
// # How Settle knows
//
// The harness stands between each store and its informer: it takes every
// write as it happens but holds it, and Settle releases the held changes one
// at a time, each once the previous one has been handled completely. The
// store's contents when Informer is called are the informer's first list;
// later writes wait for Settle. So a write made while a key is being
// reconciled, or two writes to the same key in two stores, or in one,
// reach the controllers the same way in every run, and call counts,
// Attempts and metrics are the same in every run: two writes, two
// reconciles (one per controller that maps the change to the key). A
// reconcile sees the informers' caches as of the changes released so far,
// so it may see its own write only in the reconcile that write causes.
//
// "Handled completely" is checked exactly, not by waiting for a quiet
// moment: every change the stores made has reached the harness (each
// store's revision), every controller is idle (see
// reconcile.Controller.Idle: all its informers' changes delivered, no key
// ready, no reconcile running), no resync tick is being handled, and no
// store was written meanwhile. With the changes held, nothing the harness
// runs can leave that state by itself, so one such check suffices.
//
// Held changes are released in the order the informers were created, and
// in the order they were written within one store. An informer's resync
// (informer.WithResync) ticks on the fake clock from when Informer was
// called; Settle delivers each tick that is due like a change, before the
// held changes.
//
// A held change is also released, in Settle or in the background, once the
// controllers have been busy for a tenth of a second with it waiting: a
// reconcile may be waiting for it (one blocked until a later write, or
// WithCancelOnChange), and the counts are then up to the scheduler again.
// A change held a tenth of a second with nobody settling is released as
// well, so a test that waits by other means (require.Eventually) still
// sees it.
//
// What Settle cannot see: goroutines of the test's own or a reconciler's
// (a write they make later is held like any other, but Settle does not
// wait for them to make it), and keys from FromFunc and FromChannel
// sources. An informer given a clock of its own (informer.WithClock) does
// not resync on the harness's.
package reconciletest

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
)

// SettleTimeout is how long Settle waits, in real time, before it fails the
// test: long enough for a slow CI machine, short enough to name a stuck
// controller before the test binary's own timeout.
var SettleTimeout = 30 * time.Second

// holdLimit is how long, in real time, a held change waits for busy
// controllers (or for a Settle) before it is released anyway: far longer
// than a reconcile that does not wait for anything takes, even under -race
// on a loaded machine, and short enough not to slow down the tests of a
// reconciler that does wait.
const holdLimit = 100 * time.Millisecond

// Harness owns a fake clock, the informers and controllers started on it,
// and a context cancelled when the test ends.
type Harness struct {
	// Clock is the fake clock every informer and controller of the harness
	// uses. Step it with Step, which also settles.
	Clock *clocktesting.FakeClock

	t      testing.TB
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Informers run on their own context, cancelled after everything else
	// has returned, so that no controller runs against a stopped cache.
	infCtx    context.Context
	infCancel context.CancelFunc
	infWG     sync.WaitGroup

	// heldc (buffered 1) wakes the stall watcher when a gate takes a change.
	heldc chan struct{}

	mu sync.Mutex
	// gates has one gate per informer, in creation order, and clocks the
	// informers' clocks; busy has one check per controller. Guarded by mu.
	gates  []gate
	clocks []*informerClock
	busy   []busyCheck

	// relMu makes one releaser at a time: Settle, or the stall watcher
	// when no Settle runs. It guards busySince.
	relMu sync.Mutex
	// busySince is when the releaser first saw the harness busy since it
	// was last quiet or released a change; zero if it was quiet.
	busySince time.Time
}

// busyCheck is a controller's idleness check, with its name for messages.
type busyCheck struct {
	name string
	idle func() bool
}

// Runnable is what Add runs: a *reconcile.Controller[K], of any key type.
type Runnable interface {
	Name() string
	Run(ctx context.Context) error
	Idle() bool
}

// New returns a harness whose clock starts at a fixed instant. When the test
// ends it cancels everything it started and waits for it to return.
func New(t testing.TB) *Harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	infCtx, infCancel := context.WithCancel(context.Background())
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := &Harness{
		Clock:     clk,
		t:         t,
		log:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{ReplaceAttr: dropTime})),
		ctx:       ctx,
		cancel:    cancel,
		infCtx:    infCtx,
		infCancel: infCancel,
		heldc:     make(chan struct{}, 1),
	}
	h.wg.Go(h.watchStalls)
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
		infCancel()
		h.infWG.Wait()
	})
	return h
}

// dropTime leaves the real time out of log lines: the harness's time is
// the fake clock's, and the test output orders the lines anyway.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Context returns a context that is cancelled when the test ends.
func (h *Harness) Context() context.Context { return h.ctx }

// Logger returns the logger the harness gives its informers and
// controllers: text lines on the test's output, at Info and above.
func (h *Harness) Logger() *slog.Logger { return h.log }

// Options returns the options Controller puts before the caller's: the
// harness's clock, no shutdown grace, and its logger. Pass them to a
// controller the test builds itself before handing it to Add.
func (h *Harness) Options() []reconcile.Option {
	return []reconcile.Option{reconcile.WithClock(h.Clock), reconcile.WithShutdownGrace(0), reconcile.WithLogger(h.log)}
}

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
// returns it. Its first list is the store as it is now; the writes after
// that reach it through Settle (see the package doc).
func Informer[K comparable, V any](h *Harness, name string, store *memstore.Store[K, V], opts ...informer.Option) *informer.Informer[K, V] {
	h.t.Helper()
	g, err := newGatedSource(name, store, h.heldNow)
	if err != nil {
		h.t.Fatalf("reconciletest: informer %s: %v", name, err)
	}
	clk := newInformerClock(h.Clock)
	inf, err := informer.New(name, g, append([]informer.Option{informer.WithClock(clk), informer.WithLogger(h.log)}, opts...)...)
	if err != nil {
		h.t.Fatalf("reconciletest: %v", err)
	}
	resyncs := makesTicker[K, V](opts) // after New, which has checked the options
	clk.setHandled(func() uint64 { return inf.Stats().Resyncs })
	h.mu.Lock()
	h.gates = append(h.gates, g)
	h.clocks = append(h.clocks, clk)
	h.mu.Unlock()
	h.infWG.Go(func() {
		if err := g.pump(h.infCtx); err != nil && h.infCtx.Err() == nil {
			h.t.Errorf("reconciletest: informer %s: following its store: %v", name, err)
		}
	})
	h.infWG.Go(func() {
		if err := inf.Run(h.infCtx); err != nil {
			h.t.Errorf("reconciletest: informer %s: %v", name, err)
		}
	})
	if resyncs {
		// Its resync ticker starts now, not whenever the informer's
		// goroutine gets to make it: a Step right after is a period later.
		select {
		case <-clk.made:
		case <-time.After(SettleTimeout):
			h.t.Fatalf("reconciletest: informer %s: its resync ticker was not made within %v", name, SettleTimeout)
		}
	}
	return inf
}

// Controller creates a controller with the harness's Options followed by
// opts, starts it, and returns it. Settle waits until it is idle. A bad
// option fails the test at once.
func Controller[K comparable](h *Harness, name string, rec reconcile.Reconciler[K], opts ...reconcile.Option) *reconcile.Controller[K] {
	h.t.Helper()
	c, err := reconcile.New(name, rec, append(h.Options(), opts...)...)
	if err != nil {
		h.t.Fatalf("reconciletest: %v", err)
	}
	h.Add(c)
	return c
}

// Add starts c, a controller the test built itself, until the test ends,
// and makes Settle wait until it is idle. Build it with the harness's
// Options, so that Step moves its time; Add cannot change a built
// controller.
func (h *Harness) Add(c Runnable) {
	h.mu.Lock()
	h.busy = append(h.busy, busyCheck{name: c.Name(), idle: c.Idle})
	h.mu.Unlock()
	h.Go("controller "+c.Name(), c.Run)
}

// Settle releases the changes made to the stores one at a time, each once
// everything before it has been handled, and returns when none is left and
// every controller is idle: the system has converged as far as it can
// without the clock moving (see the package doc). It fails the test after
// SettleTimeout.
func (h *Harness) Settle() {
	h.t.Helper()
	h.relMu.Lock()
	defer h.relMu.Unlock()
	deadline := time.Now().Add(SettleTimeout)
	ctx, cancel := context.WithDeadline(h.ctx, deadline)
	defer cancel()
	var p pause
	for {
		busy := h.whyBusy()
		if busy == "" {
			h.busySince = time.Time{}
			if h.fireResync() {
				p = pause{}
				continue
			}
			g := h.oldestHeld()
			if g == nil {
				return
			}
			h.mustRelease(ctx, g)
			p = pause{}
			continue
		}
		now := time.Now()
		if h.stalled(now) {
			h.mustRelease(ctx, h.oldestHeld())
			p = pause{}
			continue
		}
		if now.After(deadline) {
			h.t.Fatalf("reconciletest: not settled after %v: %s", SettleTimeout, busy)
		}
		p.wait()
	}
}

// Step advances the clock by d, firing every delay due by then (requeues,
// backoffs, timeouts, informer resyncs), and settles. To cross several delays in order, step in
// smaller increments.
func (h *Harness) Step(d time.Duration) {
	h.t.Helper()
	h.Clock.Step(d)
	h.Settle()
}

// whyBusy checks once whether every change the stores made has reached the
// harness, every resync tick sent has been handled and every controller is
// idle, with no write meanwhile, and says why not; "" if so. The order matters: the store revisions are read first
// and again last, so a write by a reconcile that ended between the checks
// is seen.
func (h *Harness) whyBusy() string {
	h.mu.Lock()
	gates, clocks, busy := h.gates, h.clocks, h.busy
	h.mu.Unlock()
	revs := make([]informer.Revision, len(gates))
	for i, g := range gates {
		revs[i] = g.storeRevision()
	}
	for i, g := range gates {
		if !g.caughtUp(revs[i]) {
			return fmt.Sprintf("the store of informer %s has changes the harness has not taken yet", g.name())
		}
	}
	for i, c := range clocks {
		if c.tickPending() {
			return fmt.Sprintf("informer %s has not taken the resync tick the clock fired", gates[i].name())
		}
	}
	for _, b := range busy {
		if !b.idle() {
			return fmt.Sprintf("controller %s is busy (or not running)", b.name)
		}
	}
	for i, g := range gates {
		if g.storeRevision() != revs[i] {
			return fmt.Sprintf("the store of informer %s changed while the harness checked", g.name())
		}
	}
	return ""
}

// fireResync sends the first resync tick that is due, in the order the
// informers were created, and reports whether there was one.
func (h *Harness) fireResync() bool {
	h.mu.Lock()
	clocks := h.clocks
	h.mu.Unlock()
	for _, c := range clocks {
		if c.fire() {
			return true
		}
	}
	return false
}

// oldestHeld returns the first informer's gate, in creation order, that
// holds a change, or nil.
func (h *Harness) oldestHeld() gate {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.gates {
		if _, ok := g.oldest(); ok {
			return g
		}
	}
	return nil
}

// stalled reports, for a releaser that has just seen the harness busy,
// whether it has been busy for holdLimit with a change held: a reconcile
// may be waiting for that change. relMu must be held.
func (h *Harness) stalled(now time.Time) bool {
	if h.busySince.IsZero() {
		h.busySince = now
		return false
	}
	return now.Sub(h.busySince) >= holdLimit && h.oldestHeld() != nil
}

// mustRelease releases g's oldest change, and fails the test at once if its
// informer does not take it before ctx is done. For Settle: it runs on the
// test's goroutine. relMu must be held.
func (h *Harness) mustRelease(ctx context.Context, g gate) {
	h.busySince = time.Time{}
	if err := g.release(ctx); err != nil {
		h.t.Fatalf("reconciletest: %v", err)
	}
}

// heldNow wakes the stall watcher: a gate has taken a change.
func (h *Harness) heldNow() {
	select {
	case h.heldc <- struct{}{}:
	default:
	}
}

// watchStalls releases held changes while no Settle runs, when they have
// waited holdLimit: at once if the harness is quiet (the test waits for
// them by other means than Settle), else once it has been busy for
// holdLimit (a reconcile may be waiting for them).
func (h *Harness) watchStalls() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.heldc:
		}
		for h.oldestHeld() != nil {
			t.Reset(holdLimit / 4)
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
			if !h.relMu.TryLock() {
				continue // Settle runs: it releases
			}
			h.releaseIfDue()
			h.relMu.Unlock()
		}
	}
}

// releaseIfDue is one look of the stall watcher. relMu must be held.
func (h *Harness) releaseIfDue() {
	g := h.oldestHeld()
	if g == nil {
		return
	}
	now := time.Now()
	if h.whyBusy() != "" {
		if !h.stalled(now) {
			return
		}
	} else if at, ok := g.oldest(); !ok || now.Sub(at) < holdLimit {
		h.busySince = time.Time{}
		return
	}
	h.busySince = time.Time{}
	if err := g.release(h.ctx); err != nil && h.ctx.Err() == nil {
		h.t.Errorf("reconciletest: %v", err)
	}
}

// pause waits between two checks of Settle: first by yielding, which lets
// the goroutines of a short reconcile run on a busy machine at once, then
// by sleeping for longer and longer, up to a millisecond, so that a long
// reconcile does not cost a core.
type pause struct{ n int }

func (p *pause) wait() {
	const yields = 50
	p.n++
	if p.n <= yields {
		runtime.Gosched()
		return
	}
	time.Sleep(min(time.Millisecond, 10*time.Microsecond<<min(p.n-yields, 7)))
}
