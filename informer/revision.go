package informer

import (
	"container/heap"
	"context"
	"fmt"
)

// Read your own writes.
//
// A caller that wrote to the store at revision rev waits for the informer
// to have it with WaitForRevision (blocking) or AfterRevision (a callback,
// for a controller that parks a key instead of blocking a worker). Both
// register a waiter in a min-heap ordered by revision, under inf.mu. The
// reflector wakes waiters under the same lock at the two places where
// lastRev moves, after the change has been applied to the cache and pushed
// to every handler's buffer: the end of replace (a list) and the end of
// applyAll (a batch of a watch's events and bookmarks, whose waiters
// are woken together once the whole batch is applied). Waking pops the waiters at or below
// lastRev, O(log n) each, so a change costs nothing when no one waits
// below it, and no goroutine is spent on a waiter that is still waiting.

// revWaiter is one WaitForRevision or AfterRevision call not yet woken.
// All fields but rev, seq, ch and f are guarded by inf.mu.
type revWaiter struct {
	rev Revision
	// seq orders waiters for the same revision by registration, so that
	// they are woken first come, first served.
	seq uint64
	// Exactly one of ch, f and reached is set: ch is closed on waking a
	// WaitForRevision; f is started on its own goroutine for AfterRevision;
	// reached is called under inf.mu, for Registration.AfterRevision.
	ch      chan struct{}
	f       func()
	reached func()
	// index is the waiter's place in the heap, -1 once out of it (woken,
	// cancelled, or dropped when Run returned).
	index int
	// fired: f was started. cancelled: stop was called first.
	fired, cancelled bool
}

// waiterHeap is a min-heap of waiters by (rev, seq), for container/heap.
type waiterHeap []*revWaiter

func (h waiterHeap) Len() int { return len(h) }

func (h waiterHeap) Less(i, j int) bool {
	if h[i].rev != h[j].rev {
		return h[i].rev < h[j].rev
	}
	return h[i].seq < h[j].seq
}

func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *waiterHeap) Push(x any) {
	w := x.(*revWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *waiterHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil // let the waiter be collected
	w.index = -1
	*h = old[:n-1]
	return w
}

// WaitForRevision blocks until the informer has reached revision rev, that
// is until LastRevision() >= rev, and returns nil; at once if it already
// has (always for rev 0). When it returns nil the cache holds every change
// the informer has applied up to LastRevision, so a Get sees a write to
// one key that the store made at rev (or a later write to it), and every
// handler whose AddHandler had returned has been given those changes to
// deliver (pushed to its buffer: a handler's method may not have run yet;
// use Registration.Idle for that).
//
// Otherwise it returns an error wrapping ctx.Err() if ctx is done first,
// or wrapping ErrStopped if Run returns first (or has returned) without
// the informer reaching rev. It does not poll: the reflector wakes it when
// it applies the event, bookmark or list that reaches rev. It may be
// called before Run: it then waits for Run to reach rev.
//
// What "reached" means:
//   - Revisions are the store's: any event, bookmark or list at rev or
//     above reaches rev, whichever key it is about. Duplicates and
//     re-sent events, at or below LastRevision, move nothing and wake no
//     one. A bookmark at or above rev wakes the waiter without a change.
//   - A store write that changes several keys in one revision reaches
//     rev with its first change the informer applies; the others follow
//     with the same revision and may not be cached yet. Wait for single
//     key writes, or check the other keys.
//   - A relist after ErrRevisionExpired sets LastRevision to the list's
//     revision R, and wakes waiters at or below R. If the store went back
//     (a restore from a snapshot), R may be below revisions already
//     reached: waiters woken then stay woken, and a waiter for a revision
//     above R waits until the store's new history reaches that number,
//     which then stands for other writes. Bound every wait with ctx.
func (inf *Informer[K, V]) WaitForRevision(ctx context.Context, rev Revision) error {
	inf.mu.Lock()
	if inf.lastRev >= rev {
		inf.mu.Unlock()
		return nil
	}
	if inf.state == stopped {
		inf.mu.Unlock()
		return fmt.Errorf("informer %q: wait for revision %d: %w", inf.name, rev, ErrStopped)
	}
	w := &revWaiter{rev: rev, ch: make(chan struct{})}
	inf.addWaiterLocked(w)
	inf.mu.Unlock()

	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	case <-inf.done:
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	select {
	case <-w.ch:
		// Woken as ctx ended or Run returned: it did reach rev, even if
		// a relist has taken lastRev back since.
		return nil
	default:
	}
	if w.index >= 0 {
		heap.Remove(&inf.waiters, w.index)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("informer %q: wait for revision %d: %w", inf.name, rev, ctx.Err())
	}
	return fmt.Errorf("informer %q: wait for revision %d: %w", inf.name, rev, ErrStopped)
}

// AfterRevision calls f once, on a goroutine of its own, when the informer
// reaches revision rev (LastRevision() >= rev; see WaitForRevision for
// what reaching means across relists, duplicates and bookmarks), or soon
// after the call if it already has. It is what a controller uses to park a
// key until its informer has caught up with a write, without blocking a
// worker.
//
// f runs on its own goroutine, started under the informer's lock but not
// run under it, so that f may call the informer (Get, AfterRevision, ...)
// and a slow f delays neither the cache nor other callbacks. No goroutine
// exists for a callback that has not fired. Run counts f among the
// goroutines it waits for, as it does handler calls: it does not return
// while an f is running, so f must not wait for Run to return.
//
// f is never started after Run has returned: callbacks that have not
// fired by then are dropped, as are those registered afterwards. Before
// Run, only rev 0 is reached.
//
// stop cancels the callback: it reports true if f had not been started and
// now never will be (the first call to stop on a callback that had not
// fired, including one dropped because Run returned), and false if f had
// already been started or stop had been called before. Like time.Timer's
// Stop, it does not wait for an f that is running.
//
// It panics if f is nil: a programming error, which would otherwise
// surface on another goroutine.
func (inf *Informer[K, V]) AfterRevision(rev Revision, f func()) (stop func() bool) {
	if f == nil {
		panic(fmt.Sprintf("informer %q: AfterRevision: nil func", inf.name))
	}
	return inf.afterRevision(&revWaiter{rev: rev, f: f, index: -1})
}

// afterRevision registers w (f or reached set) and returns its stop.
func (inf *Informer[K, V]) afterRevision(w *revWaiter) (stop func() bool) {
	inf.mu.Lock()
	switch {
	case inf.state == stopped:
		// Never fired: stop reports true once.
	case inf.lastRev >= w.rev && w.reached != nil:
		w.fired = true
		w.reached()
	case inf.lastRev >= w.rev:
		inf.fireLocked(w)
	default:
		inf.addWaiterLocked(w)
	}
	inf.mu.Unlock()
	return func() bool {
		inf.mu.Lock()
		defer inf.mu.Unlock()
		if w.fired || w.cancelled {
			return false
		}
		w.cancelled = true
		if w.index >= 0 {
			heap.Remove(&inf.waiters, w.index)
		}
		return true
	}
}

// addWaiterLocked puts w in the heap. mu must be held for writing.
func (inf *Informer[K, V]) addWaiterLocked(w *revWaiter) {
	inf.waiterSeq++
	w.seq = inf.waiterSeq
	heap.Push(&inf.waiters, w)
}

// wakeWaitersLocked wakes every waiter at or below lastRev, in order of
// revision. The reflector calls it, with mu held for writing, once a list
// or event that may have moved lastRev has been cached and pushed to the
// handlers.
func (inf *Informer[K, V]) wakeWaitersLocked() {
	for len(inf.waiters) > 0 && inf.waiters[0].rev <= inf.lastRev {
		w := heap.Pop(&inf.waiters).(*revWaiter)
		switch {
		case w.ch != nil:
			close(w.ch)
		case w.reached != nil:
			w.fired = true
			w.reached()
		default:
			inf.fireLocked(w)
		}
	}
}

// fireLocked starts w's callback. mu must be held for writing, with state
// not stopped: the goroutine is counted in wg, which Run waits on only
// after setting state to stopped.
func (inf *Informer[K, V]) fireLocked(w *revWaiter) {
	w.fired = true
	inf.wg.Add(1)
	go func() {
		defer inf.wg.Done()
		w.f()
	}()
}

// dropWaitersLocked empties the heap when Run returns: nothing will move
// lastRev again. WaitForRevision callers notice inf.done; callbacks are
// never started. mu must be held for writing.
func (inf *Informer[K, V]) dropWaitersLocked() {
	for _, w := range inf.waiters {
		w.index = -1
	}
	inf.waiters = nil
}
