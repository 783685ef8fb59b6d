package leader

import (
	"context"
	"sync"
	"time"
)

// lead runs one term that began with rec, acquired by an attempt started at
// local time start, and returns when the term has ended and its work has
// returned.
func (e *Elector) lead(ctx context.Context, rec Record, start time.Time) {
	leaderCtx, cancel := context.WithCancel(context.WithValue(ctx, termKey{}, rec.Term))
	defer cancel()
	e.mu.Lock()
	e.leaderCtx, e.renewedAt, e.working = leaderCtx, start, true
	e.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			e.mu.Lock()
			e.working = false
			e.mu.Unlock()
		}()
		e.cfg.OnStartedLeading(leaderCtx)
	})
	wg.Go(func() { e.watchdog(leaderCtx, cancel) })
	e.renew(leaderCtx, cancel, rec)
	e.stop(cancel)
	wg.Wait()
	if ctx.Err() != nil && e.cfg.ReleaseOnCancel {
		e.release(ctx, rec.Term)
	}
	e.cfg.OnStoppedLeading()
}

// stop ends the term. It cancels under mu so that IsLeader, the watchdog
// and renew see the term end atomically with respect to renewedAt.
func (e *Elector) stop(cancel context.CancelFunc) {
	e.mu.Lock()
	cancel()
	e.mu.Unlock()
}

// watchdog ends the term at renewedAt+RenewDeadline by the local clock,
// however long a renewal blocks: this is the bound the safety argument
// relies on, so it must not wait on the Lock.
func (e *Elector) watchdog(leaderCtx context.Context, cancel context.CancelFunc) {
	for {
		e.mu.Lock()
		left := e.renewedAt.Add(e.cfg.RenewDeadline).Sub(e.cfg.Clock.Now())
		if left <= 0 {
			cancel()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		t := e.cfg.Clock.NewTimer(left)
		select {
		case <-leaderCtx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// renew renews the lease every RetryPeriod until leaderCtx is done or the
// record shows another holder or term (then it ends the term at once).
// Failed renewals are retried; the watchdog ends the term if none succeeds
// in time.
func (e *Elector) renew(leaderCtx context.Context, cancel context.CancelFunc, rec Record) {
	for e.sleep(leaderCtx, e.cfg.RetryPeriod) {
		start := e.cfg.Clock.Now()
		cur, err := e.lock.Get(leaderCtx)
		if err != nil {
			continue
		}
		e.observe(cur)
		if cur.HolderIdentity != e.cfg.Identity || cur.Term != rec.Term {
			return // lost; lead stops the term
		}
		next := cur
		next.RenewTime, next.LeaseDuration = start, e.cfg.LeaseDuration
		stored, err := e.lock.Update(leaderCtx, cur, next)
		if err != nil {
			continue
		}
		e.observe(stored)
		e.mu.Lock()
		if leaderCtx.Err() == nil {
			e.renewedAt = start
		}
		e.mu.Unlock()
	}
}

// release hands the lock back, if it is still this term's, by writing an
// empty holder, so candidates take it without waiting for expiry. It runs
// after the term's work has returned, on a context detached from the
// cancelled ctx and bounded by RenewDeadline of real time.
func (e *Elector) release(ctx context.Context, term Term) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	cur, err := e.lock.Get(rctx)
	if err != nil || cur.HolderIdentity != e.cfg.Identity || cur.Term != term {
		return
	}
	next := cur
	next.HolderIdentity, next.RenewTime = "", e.cfg.Clock.Now()
	if stored, err := e.lock.Update(rctx, cur, next); err == nil {
		e.observe(stored)
	}
}
