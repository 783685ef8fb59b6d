package leader

import (
	"context"
	"errors"
	"time"
)

// Term is a fencing token: the number of the leadership term a leader holds.
// Every acquisition of the lock by an elector that was not already leading
// writes a Term one greater than the one it replaced, and a renewal keeps it,
// so the terms a Lock hands out only grow. A reconciler that stores the Term
// next to what it writes, and refuses a write whose Term is lower than the
// stored one, cannot be overwritten by a deposed leader that has not noticed
// yet (see the package doc).
type Term uint64

// Record is the content of the lock: who holds it, in which term, for how
// long. The elector judges expiry by its own clock (the local time at which
// it last saw Version change), never by AcquireTime or RenewTime, which are
// the holder's wall clock and are informational only.
type Record struct {
	// HolderIdentity is the elector that holds the lock; "" means the lock
	// was released and any candidate may take it at once.
	HolderIdentity string
	// Term is the fencing token of the holder's term; see Term.
	Term Term
	// LeaseDuration is how long candidates wait, on their own clocks, after
	// last seeing the record change before they may take it over.
	LeaseDuration time.Duration
	// AcquireTime is when, by the holder's wall clock, the term began.
	// Informational only.
	AcquireTime time.Time
	// RenewTime is when, by the holder's wall clock, the lease was last
	// renewed. Informational only.
	RenewTime time.Time
	// Version identifies one stored state of the record, for compare and
	// swap. It is opaque to the elector and set by the Lock, never by the
	// caller: an etcd lock would use the key's ModRevision, a PostgreSQL lock
	// a counter column bumped by every UPDATE. Two reads return the same
	// Version if and only if nothing was written in between.
	Version int64
}

var (
	// ErrNotFound is returned by Lock.Get when no record exists yet.
	ErrNotFound = errors.New("leader: no lock record")
	// ErrConflict is returned by Lock.Create when a record exists, and by
	// Lock.Update when the stored record is not the one the caller read.
	ErrConflict = errors.New("leader: lock record changed concurrently")
)

// Lock stores one Record with compare-and-swap semantics. It is all a
// backend has to implement: an etcd lock is a key and a transaction
// comparing its ModRevision, a PostgreSQL lock is a row and an UPDATE … WHERE
// version = $old. Implementations must be safe for concurrent use and must
// honour ctx cancellation: the elector cancels a renewal's context at its
// renew deadline.
type Lock interface {
	// Get returns the stored record, or ErrNotFound if there is none.
	Get(ctx context.Context) (Record, error)
	// Create stores r if no record exists and returns it as stored (with
	// its Version set), or returns ErrConflict if one exists.
	Create(ctx context.Context, r Record) (Record, error)
	// Update replaces the stored record with r if the stored record's
	// Version is old.Version, and returns r as stored (with its new
	// Version). It returns ErrConflict if the record was changed or deleted
	// since old was read. Other fields of old are not compared.
	Update(ctx context.Context, old, r Record) (Record, error)
	// Describe names the lock in errors and logs, e.g. "etcd:/leases/app".
	Describe() string
}
