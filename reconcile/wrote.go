package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/workqueue"
)

// Read your own writes.
//
// A reconcile that writes to a store another informer follows (a child it
// creates, deletes or updates) and is reconciled again before that
// informer has the write would see the world as it was before it acted,
// and act again: create a second child, delete one twice. Wrote records
// the write; the controller then keeps the key away from the reconciler
// until the informer has it. The gate is per controller, keyed by the
// reconciled key, holding per informer (by identity) the highest revision
// written and a deadline. Per informer, not one global revision: stores
// count revisions separately, and a quiet etcd prefix's informer lags the
// cluster's revision until a progress notification.

// DefaultReadYourWritesTimeout is how long a key waits at most for its
// informers to have its reconciles' writes (see Wrote). It exceeds the
// informer's 30 s cap on the backoff between watch attempts, so that one
// failed watch does not end a wait.
const DefaultReadYourWritesTimeout = time.Minute

// WithReadYourWritesTimeout bounds how long a key waits for an informer to
// have a write recorded with Wrote: d after the last Wrote for that key and
// informer, the key is reconciled anyway, with a warning logged and
// converge_read_your_writes_timeouts_total counted, so that no key hangs
// behind an informer that lost its store (compare-and-swap writes still
// guard against acting on the stale view). d must be positive, or New
// fails. Default: DefaultReadYourWritesTimeout (1 minute).
func WithReadYourWritesTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("WithReadYourWritesTimeout(%v): need a positive duration", d)
		}
		s.rywTimeout = d
		return nil
	}
}

// Wrote records that the reconcile whose context ctx is (or derives from)
// wrote to the store that inf follows, at revision rev (what the store's
// write returned). Until inf has seen rev (LastRevision() >= rev), the
// controller does not reconcile this key again: when the key comes up it
// parks it instead, with no failure, no backoff and no change to Status,
// counting converge_read_your_writes_skips_total but not
// controller_runtime_reconcile_total, and queues it again as soon as inf
// reaches rev. If inf has not reached rev by the read-your-writes timeout
// after the write (WithReadYourWritesTimeout), the key is reconciled
// anyway. A later reconcile of the key then sees every write that earlier
// reconciles of it recorded.
//
// Record writes that change what the next reconcile reads from another
// informer: children created or deleted under the key (a replica set
// records its pods' creates under its own key). A status written to the key
// itself rarely needs it: a conflict-retrying update reads the store.
//
// Wrote covers this process's writes only. Writes another process made
// before this Run started (a previous leader's last writes, still on their
// way to this replica's informers after a fail-over) are covered by the
// head barrier, if the controller has WithHeadBarrier(): a Run then
// reads the store's head revision when it starts and holds its workers
// until its informers reach it, at most the
// sync timeout (WithSyncTimeout; a Source that cannot tell its head is not
// waited for, and on etcd the head may take until the next progress
// notification to reach).
//
// Nothing is recorded, and Wrote returns at once, if rev is 0, if inf has
// already seen rev, if inf is nil, or if ctx is not a reconcile's. inf is
// compared by identity (an *informer.Informer is). Wrote is safe to call
// from goroutines the reconcile starts, and costs a lock only when it
// records.
func Wrote(ctx context.Context, inf informer.Revisioned, rev informer.Revision) {
	if rev == 0 || inf == nil {
		return
	}
	info, ok := ctx.Value(infoKey{}).(infoOf)
	if !ok || inf.LastRevision() >= rev {
		return
	}
	info.wrote(inf, rev)
}

// gate is a controller's read-your-writes bookkeeping. Entries outlive a
// Run (the informers keep running between Runs); a Run's end stops the
// callbacks it registered.
type gate[K comparable] struct {
	timeout time.Duration
	clock   Clock
	log     *slog.Logger
	metrics *metrics // nil without WithMetrics

	// n is len(m), read without mu so that process pays one atomic load
	// when no key waits.
	n atomic.Int64

	mu sync.Mutex
	// Guarded by mu:
	m map[K]*want[K]
	// swept is len(m) after the last sweep: the next is due when m has
	// doubled since.
	swept int
}

// minSweep is the map size below which Wrote never sweeps.
const minSweep = 64

// want is what one key waits for.
type want[K comparable] struct {
	revs []wantRev
	// parked: process found the key waiting and parked it; cleared when
	// process sees the key again, or the Run ends.
	parked bool
	// The AfterRevision callback registered for the key, if one is live
	// (not fired, not stopped): on waitInf at waitRev, by run. seq numbers
	// registrations, so that a callback that fired as it was stopped (it
	// then waits for mu) knows it is stale.
	stop    func() bool
	waitInf informer.Revisioned
	waitRev informer.Revision
	run     *run[K]
	seq     uint64
}

// wantRev is one informer's highest revision written under a key, and
// when the key stops waiting for it.
type wantRev struct {
	inf      informer.Revisioned
	rev      informer.Revision
	deadline time.Time
}

func (g *gate[K]) init(s *settings, m *metrics) {
	g.timeout, g.clock, g.log, g.metrics = s.rywTimeout, s.clock, s.logger, m
	g.m = make(map[K]*want[K])
}

// record notes a write at rev to inf's store by a reconcile of key.
func (g *gate[K]) record(key K, inf informer.Revisioned, rev informer.Revision) {
	now := g.clock.Now()
	deadline := now.Add(g.timeout)
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.m[key]
	if w == nil {
		if len(g.m) >= 2*max(g.swept, minSweep) {
			g.sweepLocked(now)
		}
		w = &want[K]{}
		g.m[key] = w
		g.n.Add(1)
	}
	for i := range w.revs {
		if w.revs[i].inf == inf {
			w.revs[i].rev = max(w.revs[i].rev, rev)
			w.revs[i].deadline = deadline
			return
		}
	}
	w.revs = append(w.revs, wantRev{inf: inf, rev: rev, deadline: deadline})
}

// sweepLocked drops the entries of keys not parked whose informers have
// all reached their revisions or whose deadlines have all passed: keys
// that were never reconciled again would otherwise stay for good. A later
// reconcile of such a key has nothing to wait for anyway.
func (g *gate[K]) sweepLocked(now time.Time) {
	for k, w := range g.m {
		if w.parked {
			continue
		}
		done := true
		for _, rv := range w.revs {
			if rv.inf.LastRevision() < rv.rev && now.Before(rv.deadline) {
				done = false
				break
			}
		}
		if done {
			g.deleteLocked(k, w)
		}
	}
	g.swept = len(g.m)
}

func (g *gate[K]) deleteLocked(key K, w *want[K]) {
	g.stopLocked(w)
	g.setParkedLocked(w, false)
	delete(g.m, key)
	g.n.Add(-1)
}

// stopLocked cancels w's callback, if one is live.
func (g *gate[K]) stopLocked(w *want[K]) {
	if w.stop != nil {
		w.stop()
		w.stop, w.waitInf, w.run = nil, nil, nil
	}
}

func (g *gate[K]) setParkedLocked(w *want[K], parked bool) {
	if w.parked == parked {
		return
	}
	w.parked = parked
	if g.metrics != nil {
		if parked {
			g.metrics.rywWaiting.Inc()
		} else {
			g.metrics.rywWaiting.Dec()
		}
	}
}

// check is process's gate: it reports whether key must wait, and if so
// parks it and queues it at the earliest deadline as a backstop (arm then
// registers the wake-up, once the worker has given the key back).
// Otherwise key is free to reconcile: its entry is dropped, with a timeout
// counted and logged for each informer that did not catch up in time.
func (g *gate[K]) check(r *run[K], key K) (wait bool) {
	g.mu.Lock()
	w := g.m[key]
	if w == nil {
		g.mu.Unlock()
		return false
	}
	g.setParkedLocked(w, false)
	now := g.clock.Now()
	var timedOut []wantRev
	kept := w.revs[:0]
	for _, rv := range w.revs {
		switch {
		case rv.inf.LastRevision() >= rv.rev:
		case !now.Before(rv.deadline):
			timedOut = append(timedOut, rv)
		default:
			kept = append(kept, rv)
		}
	}
	clear(w.revs[len(kept):])
	w.revs = kept
	var backstop time.Duration
	if len(kept) == 0 {
		g.deleteLocked(key, w)
	} else {
		wait = true
		g.setParkedLocked(w, true)
		earliest := kept[0].deadline
		for _, rv := range kept[1:] {
			if rv.deadline.Before(earliest) {
				earliest = rv.deadline
			}
		}
		backstop = earliest.Sub(now)
	}
	g.mu.Unlock()

	if m := g.metrics; m != nil {
		if wait {
			m.rywSkips.Inc()
		}
		m.rywTimeouts.Add(float64(len(timedOut)))
	}
	for _, rv := range timedOut {
		g.log.Warn("read-your-writes: informer has not seen this key's write within the timeout; reconciling anyway",
			"key", key, "informer", rv.inf.Name(), "revision", rv.rev, "lastRevision", rv.inf.LastRevision(), "timeout", g.timeout)
	}
	if wait {
		r.q.AddAfter(key, backstop)
	}
	return wait
}

// arm registers the wake-up of a key that process parked, after the worker
// has given the key back (Done): a callback for when the first informer
// still behind has the revision, once per entry (a live one of this Run is
// kept). If the run watches that informer, the callback waits until the
// run's handlers have also been given the change (run.afterDelivered): a
// change they map to the key (a child's, under Owns) then queues the key
// before the wake-up, which finds it queued, so the key runs once, not once
// for each.
// Registering only once no worker holds the key is what lets fire leave a
// key a worker holds alone (see fire). If every informer has caught up
// since check, it queues the key at once.
func (g *gate[K]) arm(r *run[K], key K) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.m[key]
	if w == nil || !w.parked || (w.stop != nil && w.run == r) {
		return
	}
	g.stopLocked(w) // another Run's
	for _, rv := range w.revs {
		if rv.inf.LastRevision() < rv.rev {
			w.seq++
			w.waitInf, w.waitRev, w.run = rv.inf, rv.rev, r
			seq := w.seq
			w.stop = r.afterDelivered(rv.inf, rv.rev, func() { g.fire(r, key, w, seq) })
			return
		}
	}
	r.q.AddWithOptions(workqueue.AddOptions{Reason: wroteReason}, key)
}

// fire is a parked key's AfterRevision callback: it queues the key, unless
// process has seen it since (it was queued by other means), the entry is
// gone, or this callback was stopped as it fired. It queues with the
// queue, not enqueue: this is not a change, so it cancels no reconcile
// (WithCancelOnChange) and unparks no failed key. And it leaves alone a key
// that a worker holds: that worker checks the gate before it reconciles
// (a child's change mapped by Owns often queues the key at the same
// moment), or has parked the key again and arms after Done, which finds
// this callback spent and queues the key itself; an Add would only run
// the key once more. It decides under mu, which check and arm hold too.
func (g *gate[K]) fire(r *run[K], key K, w *want[K], seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m[key] != w || w.run != r || w.stop == nil || w.seq != seq {
		return
	}
	w.stop, w.waitInf, w.run = nil, nil, nil
	if w.parked {
		r.q.AddUnlessProcessing(key)
	}
}

// busy reports whether a parked key is on its way back to a worker: its
// wake-up is not armed yet (the worker that parked it has not given it
// back), has fired, or is due (its informer has reached the revision, the
// callback has not run). A parked key waiting for an informer is not busy:
// it waits, like a delayed key. Idle checks it before the queue, so that a
// callback firing in between is seen in the queue.
func (g *gate[K]) busy() bool {
	if g.n.Load() == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.m {
		if w.parked && (w.stop == nil || w.waitInf.LastRevision() >= w.waitRev) {
			return true
		}
	}
	return false
}

// endRun stops the callbacks r registered and unparks its keys: r's queue
// is gone, and the next Run reconciles every key from the informers anyway
// (parking it again if it must still wait).
func (g *gate[K]) endRun(r *run[K]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.m {
		if w.run == r {
			g.stopLocked(w)
		}
		g.setParkedLocked(w, false)
	}
}
