package informer

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Stats counts what an informer has done since New.
type Stats struct {
	// Lists counts successful lists; the first fills the cache, the rest
	// are relists after an expired revision.
	Lists uint64
	// ListErrors counts failed lists.
	ListErrors uint64
	// WatchErrors counts watches that failed, other than by expiry.
	WatchErrors uint64
	// Expired counts watches that failed with ErrRevisionExpired.
	Expired uint64
	// Events counts watch events applied (duplicates skipped excluded).
	Events uint64
	// Resyncs counts resync periods that fired.
	Resyncs uint64
	// Violations counts Put and Delete events that broke the Source
	// contract's revision order, which the informer logs and skips: an
	// event at or below the revision the watch started after (other than
	// a re-sent one, at the revision the cache holds for the key), and an
	// event below the revision the cache holds for its key. A store whose
	// revisions went backwards without its Source saying so (a snapshot
	// restore, a replaced store) shows up here; its Source should have
	// returned ErrRevisionExpired. Duplicates, which the contract allows,
	// are not counted.
	Violations uint64
	// Panics counts panics recovered in the user's code: a handler's
	// method, the transform (WithTransform) or an IndexFunc. Each is
	// logged at Error with its stack; what happens to the change that
	// panicked is documented on Handler and on the package.
	Panics uint64
	// DecodeErrors counts values the informer could not take: entries
	// and Puts with Err set, and values the transform panicked on, once
	// per key and revision (a relist that finds the same bad value again
	// does not count it again). Each makes its key bad (see BadKey) rather
	// than stopping the stream.
	DecodeErrors uint64
	// BadKeys is how many keys are bad now (see Informer.BadKeys).
	BadKeys uint64
	// LastEvent is when, by the informer's clock, the last watch event
	// or bookmark that moved its revision forward was applied; zero
	// before the first. With the store's head revision (Head) it tells a
	// cache that lags from one that has nothing to receive.
	LastEvent time.Time
}

type stats struct {
	lists, listErrors, watchErrors, expired, events, resyncs, violations, panics atomic.Uint64
	decodeErrors                                                                 atomic.Uint64
	// badKeys is len(Informer.bad), stored on every change of it.
	badKeys atomic.Uint64
	// lastEvent is Stats.LastEvent in Unix nanoseconds, 0 for none.
	lastEvent atomic.Int64
}

// eventApplied notes the time of an event that moved the revision
// forward: one clock read and one atomic store per such event, beside the
// cache update and the handlers' notification it follows.
func (inf *Informer[K, V]) eventApplied() {
	inf.stats.lastEvent.Store(inf.clock.Now().UnixNano())
}

// HeadRevisioner is implemented by a Source that can tell the store's
// current revision cheaply (a count-only read, a max over an index). The
// debug pages compare it with the informer's LastRevision to show how far
// the cache lags; a Source without it shows "unknown".
type HeadRevisioner interface {
	// Revision returns the store's current revision.
	Revision(ctx context.Context) (Revision, error)
}

// Head returns the store's current revision if the informer's Source
// implements HeadRevisioner, or has a Revision() Revision method (an
// in-process store such as memstore.Store, which answers at once); ok is
// false if it has neither.
func (inf *Informer[K, V]) Head(ctx context.Context) (rev Revision, ok bool, err error) {
	switch h := inf.src.(type) {
	case HeadRevisioner:
		rev, err = h.Revision(ctx)
		return rev, true, err
	case interface{ Revision() Revision }:
		return h.Revision(), true, nil
	}
	return 0, false, nil
}

// Stats returns the informer's counters.
func (inf *Informer[K, V]) Stats() Stats {
	return Stats{
		Lists:        inf.stats.lists.Load(),
		ListErrors:   inf.stats.listErrors.Load(),
		WatchErrors:  inf.stats.watchErrors.Load(),
		Expired:      inf.stats.expired.Load(),
		Events:       inf.stats.events.Load(),
		Resyncs:      inf.stats.resyncs.Load(),
		Violations:   inf.stats.violations.Load(),
		Panics:       inf.stats.panics.Load(),
		DecodeErrors: inf.stats.decodeErrors.Load(),
		BadKeys:      inf.stats.badKeys.Load(),
		LastEvent:    unixNanos(inf.stats.lastEvent.Load()),
	}
}

func unixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// recovered is a panic in the user's code, recovered so that it cannot
// take the process down with it.
type recovered struct {
	what  string // what panicked: "transform", `IndexFunc "owner"`, "OnAdd"
	value any
	stack []byte
}

func (r *recovered) Error() string { return fmt.Sprintf("%s panicked: %v", r.what, r.value) }

// protect calls f and returns a panic in it as a *recovered.
func protect(what string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &recovered{what: what, value: r, stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// panicked counts and logs a recovered panic about key (at rev, if not 0),
// and what was done about it.
func (inf *Informer[K, V]) panicked(err error, key K, rev Revision, outcome string) {
	inf.stats.panics.Add(1)
	attrs := []any{"key", key, "outcome", outcome}
	if rev != 0 {
		attrs = append(attrs, "revision", rev)
	}
	if r, ok := err.(*recovered); ok {
		attrs = append(attrs, "panic", fmt.Sprint(r.value), "stack", string(r.stack))
	}
	inf.log.Error(err.Error(), attrs...)
}
