package leader

import "time"

// Status is a snapshot of what an Elector knows, for debug pages and logs.
type Status struct {
	// Identity is this elector's identity (Config.Identity).
	Identity string
	// Lock describes the lock (Lock.Describe).
	Lock string
	// Leading is IsLeader at the moment of the snapshot.
	Leading bool
	// Holder is the holder last seen in the lock, which may be this
	// elector; "" before the first read and while the lock is released.
	Holder string
	// Term is the term of the record last seen in the lock: this elector's
	// term while it leads, the other holder's otherwise; 0 before the
	// first read.
	Term Term
	// RenewedAt is when this elector's current or last term was last
	// acquired or renewed, by the elector's clock; zero if it never led.
	RenewedAt time.Time
	// RenewDeadline is RenewedAt plus Config.RenewDeadline: while leading,
	// the moment the lease ends unless a renewal succeeds first. Zero if
	// it never led.
	RenewDeadline time.Time
	// LeaseDuration is the lease duration of the record last seen.
	LeaseDuration time.Duration
	// ObservedAt is when, by the elector's clock, the record's current
	// version was first seen: another holder's lease expires for this
	// elector at ObservedAt+LeaseDuration. Zero before the first read.
	ObservedAt time.Time
}

// Status returns a snapshot of the elector's state, read under its lock:
// one consistent view, cheap enough for a page that refreshes every second.
func (e *Elector) Status() Status {
	leading := e.IsLeader()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Status{
		Identity: e.cfg.Identity,
		Lock:     e.lock.Describe(),
		Leading:  leading,
		Holder:   e.leader,
	}
	if e.haveObserved {
		s.Term, s.LeaseDuration, s.ObservedAt = e.observed.Term, e.observed.LeaseDuration, e.observedAt
	}
	if !e.renewedAt.IsZero() {
		s.RenewedAt, s.RenewDeadline = e.renewedAt, e.renewedAt.Add(e.cfg.RenewDeadline)
	}
	return s
}
