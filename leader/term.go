package leader

import (
	"context"
	"errors"
	"sync"
	"time"
)

// lead runs one term that began with rec, acquired by an attempt started at
// local time start, and returns when the term has ended and its work has
// returned.
//
// A term has two contexts. The lease context is live while this elector
// holds the lease by its own reckoning: the watchdog and a record showing
// another holder end it, and so does lead once the term is over. Renewals
// run on it. The leader's context, which OnStartedLeading gets, is its
// child and is also cancelled as soon as ctx is done. When ctx is done the
// lease is therefore kept, and renewed, until the work has returned: work
// still finishing what it started never overlaps the next leader's (see
// the package doc).
func (e *Elector) lead(ctx context.Context, rec Record, start time.Time) {
	base, endLease := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), termKey{}, rec.Term))
	defer endLease()
	leaseCtx := context.WithValue(base, leaseKey{}, &termLease{e: e, lease: base, end: endLease})
	leaderCtx, cancelLeader := context.WithCancel(leaseCtx)
	defer cancelLeader()
	e.mu.Lock()
	e.leaderCtx, e.renewedAt, e.working = leaderCtx, start, true
	e.mu.Unlock()
	stopOnDone := context.AfterFunc(ctx, func() { e.stop(cancelLeader) })
	defer stopOnDone()

	workDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			e.mu.Lock()
			e.working = false
			e.mu.Unlock()
			close(workDone)
		}()
		e.cfg.OnStartedLeading(leaderCtx)
	})
	wg.Go(func() { e.watchdog(leaseCtx, endLease) })
	wg.Go(func() { e.renew(leaseCtx, endLease, rec) })
	hold(ctx, leaseCtx, workDone)
	e.stop(endLease)
	wg.Wait()
	if ctx.Err() != nil && e.cfg.ReleaseOnCancel {
		e.release(ctx, rec.Term)
	}
	e.cfg.OnStoppedLeading()
}

// hold returns when the lease has ended, or when both ctx is done and the
// work has returned. Work that returns early, while ctx is not done, does
// not end the term: it lasts until ctx is done or the lease is lost, as it
// always has.
func hold(ctx, leaseCtx context.Context, workDone <-chan struct{}) {
	work, stop := workDone, ctx.Done()
	for work != nil || stop != nil {
		select {
		case <-leaseCtx.Done():
			return
		case <-work:
			work = nil // a nil channel blocks: wait for the other one
		case <-stop:
			stop = nil
		}
	}
}

// stop cancels a term's context under mu, so that IsLeader, the watchdog
// and renew see it end atomically with respect to renewedAt (cancelling
// the lease context cancels the leader's, its child, before returning).
func (e *Elector) stop(cancel context.CancelFunc) {
	e.mu.Lock()
	cancel()
	e.mu.Unlock()
}

// watchdog ends the lease at renewedAt+RenewDeadline by the local clock,
// however long a renewal blocks: this is the bound the safety argument
// relies on, so it must not wait on the Lock.
func (e *Elector) watchdog(leaseCtx context.Context, endLease context.CancelFunc) {
	for {
		e.mu.Lock()
		left := e.renewedAt.Add(e.cfg.RenewDeadline).Sub(e.cfg.Clock.Now())
		if left <= 0 {
			endLease()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		t := e.cfg.Clock.NewTimer(left)
		select {
		case <-leaseCtx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// renew renews the lease every RetryPeriod until leaseCtx is done or the
// record shows another holder or term (then it ends the lease at once).
// Failed renewals are retried; the watchdog ends the lease if none
// succeeds in time.
func (e *Elector) renew(leaseCtx context.Context, endLease context.CancelFunc, rec Record) {
	for e.sleep(leaseCtx, e.cfg.RetryPeriod) {
		start := e.cfg.Clock.Now()
		cur, err := e.lock.Get(leaseCtx)
		if err != nil {
			continue
		}
		e.observe(cur)
		if cur.HolderIdentity != e.cfg.Identity || cur.Term != rec.Term {
			e.stop(endLease) // lost
			return
		}
		next := cur
		next.RenewTime, next.LeaseDuration = start, e.cfg.LeaseDuration
		stored, err := e.lock.Update(leaseCtx, cur, next)
		if err != nil {
			continue
		}
		e.observe(stored)
		e.mu.Lock()
		if leaseCtx.Err() == nil {
			e.renewedAt = start
		}
		e.mu.Unlock()
	}
}

// release hands the lock back, if it is still this term's, by writing an
// empty holder, so candidates take it without waiting for expiry; a
// conflict is retried as long as the record still names this holder and
// term. It runs
// after the term's work has returned, on a context detached from the
// cancelled ctx and bounded by RenewDeadline of real time.
func (e *Elector) release(ctx context.Context, term Term) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	for rctx.Err() == nil {
		cur, err := e.lock.Get(rctx)
		if err != nil || cur.HolderIdentity != e.cfg.Identity || cur.Term != term {
			return
		}
		next := cur
		next.HolderIdentity, next.RenewTime = "", e.cfg.Clock.Now()
		stored, err := e.lock.Update(rctx, cur, next)
		if err == nil {
			e.observe(stored)
			return
		}
		if !errors.Is(err, ErrConflict) {
			return
		}
		// A conflict on a record that may still be this term's: a renewal
		// whose caller gave up can still commit after the Get above. Read
		// it again, and release it if it is still ours; otherwise a
		// planned hand-over would wait a whole lease.
	}
}

type leaseKey struct{}

// termLease is a term's lease, for LeaseValid.
type termLease struct {
	e     *Elector
	lease context.Context
	end   context.CancelFunc
}

// LeaseValid reports whether ctx belongs to a term (it is, or derives
// from, a leader's context) whose lease is valid now by the elector's own
// clock, as IsLeader judges it: the lease has not ended and was renewed
// less than RenewDeadline ago. Work that must not start without a lease
// checks it just before it starts: a process resumed from a pause
// (SIGSTOP, a frozen VM) runs before its watchdog's timer fires, and its
// contexts are not cancelled yet.
//
// When the renew deadline has passed but the lease has not ended yet,
// LeaseValid ends it at once, as the watchdog is about to: a caller that
// found the lease invalid never finds it valid again, and the term's
// contexts are cancelled. It returns false for a context of no term.
func LeaseValid(ctx context.Context) bool {
	tl, ok := ctx.Value(leaseKey{}).(*termLease)
	if !ok {
		return false
	}
	e := tl.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if tl.lease.Err() != nil {
		return false
	}
	// renewedAt is this term's: lead sets it before the term starts, and
	// renew moves it only while the lease has not ended.
	if e.cfg.Clock.Since(e.renewedAt) < e.cfg.RenewDeadline {
		return true
	}
	tl.end()
	return false
}
