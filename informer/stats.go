package informer

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
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
}

type stats struct {
	lists, listErrors, watchErrors, expired, events, resyncs, violations, panics atomic.Uint64
}

// Stats returns the informer's counters.
func (inf *Informer[K, V]) Stats() Stats {
	return Stats{
		Lists:       inf.stats.lists.Load(),
		ListErrors:  inf.stats.listErrors.Load(),
		WatchErrors: inf.stats.watchErrors.Load(),
		Expired:     inf.stats.expired.Load(),
		Events:      inf.stats.events.Load(),
		Resyncs:     inf.stats.resyncs.Load(),
		Violations:  inf.stats.violations.Load(),
		Panics:      inf.stats.panics.Load(),
	}
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
