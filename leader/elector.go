package leader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Elector campaigns for a Lock, leads while it can renew it, and steps down
// (cancelling the leader's context) when it cannot. Create one with New and
// call Run once. IsLeader, Leader and Check are safe to call from any
// goroutine at any time.
type Elector struct {
	lock Lock
	cfg  Config // defaults applied, validated

	started atomic.Bool // Run has been called

	mu sync.Mutex
	// observed is the last record read from or written to the lock, and
	// observedAt the local time at which its Version was first seen. Expiry
	// of another holder's lease is judged only from these (see the package
	// doc); haveObserved is false until the first read.
	observed     Record
	observedAt   time.Time
	haveObserved bool
	// leader is observed.HolderIdentity, kept for Leader and OnNewLeader.
	leader string
	// leaderCtx is the leader's context of the current or last term, nil
	// before the first. It is cancelled, always while holding mu, when the
	// term's lease ends or Run's context is done. renewedAt only moves
	// forward while the lease has not ended (see lead), so a lease never
	// outlives renewedAt+RenewDeadline.
	leaderCtx context.Context
	// renewedAt is the local time at which the last successful acquisition
	// or renewal of the current term was started (not finished: the write
	// happened no earlier, so others saw it no earlier).
	renewedAt time.Time
	// working is true from the start of a term until its OnStartedLeading
	// returns.
	working bool
}

// New returns an Elector for lock, or an error wrapping ErrInvalidConfig if
// cfg is invalid: empty Identity, a negative duration, JitterFactor below 1
// or not a finite number (NaN, +Inf), RenewDeadline not shorter than
// LeaseDuration, or RenewDeadline not longer than JitterFactor×RetryPeriod
// (all after defaults are applied; the error marks a value the caller left
// zero as "(the default)").
func New(lock Lock, cfg Config) (*Elector, error) {
	if lock == nil {
		return nil, fmt.Errorf("%w: nil Lock", ErrInvalidConfig)
	}
	set := cfg
	cfg = cfg.withDefaults()
	if err := cfg.validate(set); err != nil {
		return nil, err
	}
	return &Elector{lock: lock, cfg: cfg}, nil
}

// Run campaigns, leads and renews until ctx is done, and returns nil then.
// Each term runs OnStartedLeading. When the term ends (renewals failed until
// RenewDeadline, or another holder was seen) Run cancels the leader's
// context, waits for OnStartedLeading to return, calls OnStoppedLeading and
// campaigns again.
//
// When ctx is done during a term, Run cancels the leader's context at once
// but keeps renewing the lease until OnStartedLeading has returned, so that
// the next leader cannot start while this one's work is still finishing;
// if renewals fail meanwhile, the lease still ends RenewDeadline after the
// last successful one, as in any term. Then, if ReleaseOnCancel is set, Run
// releases the lock; it calls OnStoppedLeading and returns. Run returns an
// error only if it was called before on this Elector.
func (e *Elector) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("leader: Run called twice on one Elector")
	}
	for {
		rec, start, ok := e.acquire(ctx)
		if !ok {
			return nil
		}
		e.lead(ctx, rec, start)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// IsLeader reports whether this elector leads now: a term has started, its
// context is not cancelled, and its renew deadline has not passed.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leaderCtx != nil && e.leaderCtx.Err() == nil &&
		e.cfg.Clock.Since(e.renewedAt) < e.cfg.RenewDeadline
}

// Leader returns the holder this elector last saw in the lock, which may be
// itself; "" before the first read and while the lock is released.
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Check is a health check: it returns an error while a term's work
// (OnStartedLeading) is still running although the term was last renewed
// more than RenewDeadline ago. That means either the elector is wedged or
// the leader's work ignores the cancellation of its context and may be
// acting without a lease. Otherwise, leading or not, it returns nil.
func (e *Elector) Check() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if since := e.cfg.Clock.Since(e.renewedAt); e.working && since > e.cfg.RenewDeadline {
		return fmt.Errorf("leader %q on %s: term still running %v after its last renewal, more than RenewDeadline %v",
			e.cfg.Identity, e.lock.Describe(), since, e.cfg.RenewDeadline)
	}
	return nil
}

type termKey struct{}

// TermFromContext returns the fencing token of the term whose leader's
// context ctx is (or derives from), and false if ctx is not a leader's
// context.
func TermFromContext(ctx context.Context) (Term, bool) {
	t, ok := ctx.Value(termKey{}).(Term)
	return t, ok
}

// acquire tries at once and then after every jittered retry period until it
// holds the lock (returning the stored record and the local time the
// successful attempt started) or ctx is done (returning false).
func (e *Elector) acquire(ctx context.Context) (Record, time.Time, bool) {
	for {
		start := e.cfg.Clock.Now()
		if rec, ok := e.tryAcquire(ctx); ok {
			return rec, start, true
		}
		wait := e.cfg.RetryPeriod + time.Duration(rand.Float64()*(e.cfg.JitterFactor-1)*float64(e.cfg.RetryPeriod))
		if !e.sleep(ctx, wait) {
			return Record{}, time.Time{}, false
		}
	}
}

// tryAcquire makes one attempt: create the record, or take over one that is
// released, ours from an earlier term, or expired by local observation.
func (e *Elector) tryAcquire(ctx context.Context) (Record, bool) {
	now := e.cfg.Clock.Now()
	mine := Record{HolderIdentity: e.cfg.Identity, Term: 1, LeaseDuration: e.cfg.LeaseDuration, AcquireTime: now, RenewTime: now}
	cur, err := e.lock.Get(ctx)
	if errors.Is(err, ErrNotFound) {
		stored, err := e.lock.Create(ctx, mine)
		if err != nil {
			return Record{}, false
		}
		e.observe(stored)
		return stored, true
	}
	if err != nil {
		return Record{}, false
	}
	e.observe(cur)
	if cur.HolderIdentity != "" && cur.HolderIdentity != e.cfg.Identity && !e.expired() {
		return Record{}, false
	}
	mine.Term = cur.Term + 1
	stored, err := e.lock.Update(ctx, cur, mine)
	if err != nil {
		return Record{}, false
	}
	e.observe(stored)
	return stored, true
}

// expired reports whether the observed record's lease has run out by the
// local clock, counted from when this elector first saw its Version.
func (e *Elector) expired() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.cfg.Clock.Now().Before(e.observedAt.Add(e.observed.LeaseDuration))
}

// observe records rec as the latest state of the lock, restarting the
// expiry count if its Version is new, and calls OnNewLeader if the holder
// changed to someone.
func (e *Elector) observe(rec Record) {
	e.mu.Lock()
	if !e.haveObserved || rec.Version != e.observed.Version {
		e.observed, e.observedAt, e.haveObserved = rec, e.cfg.Clock.Now(), true
	}
	changed := rec.HolderIdentity != e.leader
	e.leader = rec.HolderIdentity
	e.mu.Unlock()
	if changed && rec.HolderIdentity != "" {
		e.cfg.OnNewLeader(rec.HolderIdentity)
	}
}

// sleep waits d on the clock; it returns false if ctx is done first.
func (e *Elector) sleep(ctx context.Context, d time.Duration) bool {
	t := e.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
