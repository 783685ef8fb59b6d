package poll

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// Compile-time proof that a Source is an informer.Source.
var _ informer.Source[string, int] = (*Source[string, int])(nil)

// Source is an informer.Source over a list function. Create one with New;
// the zero value is not usable. All methods are safe for concurrent use; see
// the package documentation for what concurrent use means for revisions.
type Source[K comparable, V any] struct {
	// Set by New and only read afterwards.
	list     func(ctx context.Context) ([]informer.Entry[K, V], error)
	equal    func(a, b V) bool
	interval time.Duration
	jitter   float64
	clock    clock.WithTicker

	mu sync.Mutex
	// Guarded by mu.

	// rev counts the changes found so far; it is the revision of last.
	rev informer.Revision
	// last is the latest list, which the next one is diffed against. A
	// snapshot is never modified once built, only replaced.
	last snapshot[K, V]
}

// snapshot is one list, deduplicated by key.
type snapshot[K comparable, V any] struct {
	// entries are in list order, each key once.
	entries []informer.Entry[K, V]
	// index maps each key to its position in entries.
	index map[K]int
}

// New returns a Source that lists with list and keys each listed value with
// key, configured by opts. list is called by List and on every poll of
// Watch, with their context; key must return the same key for the same
// object on every list. New returns an error if list or key is nil, or for
// an option that cannot work, naming the option.
func New[K comparable, V any](list func(ctx context.Context) ([]V, error), key func(V) K, opts ...Option[V]) (*Source[K, V], error) {
	if list == nil || key == nil {
		return nil, errors.New("poll.New: list and key must not be nil")
	}
	return newSource("poll.New", func(ctx context.Context) ([]informer.Entry[K, V], error) {
		values, err := list(ctx)
		if err != nil {
			return nil, err
		}
		entries := make([]informer.Entry[K, V], len(values))
		for i, v := range values {
			entries[i] = informer.Entry[K, V]{Key: key(v), Value: v}
		}
		return entries, nil
	}, opts)
}

// NewEntries is New for a list function that keys its values itself and
// can report a value it could not read: an entry with Err set is a bad
// value of its key (a record that does not parse, say), which the Source
// lists with Err and watches as a Put with Err instead of failing, so
// that one bad record never stops the others (see the package
// documentation). An entry's Revision is ignored: the Source counts its
// own. The Source keeps the returned slice and may modify it, so list must
// return a new one each time. NewEntries returns an error if list is nil,
// or for an option that cannot work.
func NewEntries[K comparable, V any](list func(ctx context.Context) ([]informer.Entry[K, V], error), opts ...Option[V]) (*Source[K, V], error) {
	if list == nil {
		return nil, errors.New("poll.NewEntries: list must not be nil")
	}
	return newSource("poll.NewEntries", list, opts)
}

func newSource[K comparable, V any](ctor string, list func(ctx context.Context) ([]informer.Entry[K, V], error), opts []Option[V]) (*Source[K, V], error) {
	c, equal, err := newConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ctor, err)
	}
	return &Source[K, V]{
		list:     list,
		equal:    equal,
		interval: c.interval,
		jitter:   c.jitter,
		clock:    c.clock,
	}, nil
}

// List calls the list function and returns its values, deduplicated by key
// (the last value wins, at the first position), and the Source's revision
// after counting the changes since its previous list. A running Watch then
// expires at its next poll. The entries are the caller's to modify. A done
// ctx fails List before it calls the list function, which may not check
// ctx itself (an in-memory one need not): a caller that gave up must not
// make the running Watch expire.
func (s *Source[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("poll: list: %w", err)
	}
	listed, err := s.list(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("poll: list: %w", err)
	}
	next := newSnapshot(listed)
	s.mu.Lock()
	rev := s.rev + informer.Revision(len(s.diff(s.last, next, s.rev)))
	s.rev, s.last = rev, next
	s.mu.Unlock()
	return slices.Clone(next.entries), rev, nil
}

// Watch polls: it waits one jittered interval, lists, diffs the list
// against the previous one and emits the changes, each with the next
// revision, then, if there were any, an informer.Bookmark at the last of
// them, which tells the informer that the batch is complete (so that it
// resumes a failed watch after it). It repeats until ctx is done (it
// returns ctx.Err()), emit returns an error (it returns that error), or
// the list function fails (it returns that error, wrapped).
//
// after must be the revision of the Source's latest list: what List
// returned, or the revision of the last event a Watch emitted, if nothing
// has listed since. Otherwise Watch returns an error that errors.Is
// informer.ErrRevisionExpired, at once, or at the poll that finds that
// another List or Watch has listed meanwhile.
func (s *Source[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	s.mu.Lock()
	err := s.expired(after)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for {
		if err := s.wait(ctx); err != nil {
			return err
		}
		listed, err := s.list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("poll: watch after revision %d: list: %w", after, err)
		}
		next := newSnapshot(listed)

		s.mu.Lock()
		if err := s.expired(after); err != nil {
			s.mu.Unlock()
			return err
		}
		events := s.diff(s.last, next, after)
		s.rev += informer.Revision(len(events))
		s.last = next
		s.mu.Unlock()

		for _, e := range events {
			if err := emit(e); err != nil {
				return err
			}
		}
		if len(events) == 0 {
			continue
		}
		after += informer.Revision(len(events))
		// The batch is complete: say so. An informer resumes a failed
		// watch after the last revision it knows to be complete, which
		// without this would be one short of after, and a Watch after
		// anything but the latest list expires: one failed list would
		// relist and re-deliver every key.
		if err := emit(informer.Event[K, V]{Type: informer.Bookmark, Revision: after}); err != nil {
			return err
		}
	}
}

// expired returns an ErrRevisionExpired error unless after is the revision
// of the latest list. s.mu must be held.
func (s *Source[K, V]) expired(after informer.Revision) error {
	if after == s.rev {
		return nil
	}
	return fmt.Errorf("poll: watch after revision %d: the latest list is at revision %d: %w", after, s.rev, informer.ErrRevisionExpired)
}

// wait waits one jittered interval, or until ctx is done.
func (s *Source[K, V]) wait(ctx context.Context) error {
	t := s.clock.NewTimer(jittered(s.interval, s.jitter, rand.Float64()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// jittered spreads d by the fraction f: u in [0, 1) maps linearly onto
// [d*(1-f), d*(1+f)).
func jittered(d time.Duration, f, u float64) time.Duration {
	return d + time.Duration(float64(d)*f*(2*u-1))
}

// newSnapshot deduplicates entries by key, in place: the last entry wins,
// at the position of the first. A bad entry's Value is cleared, and every
// Revision, which the Source counts itself.
func newSnapshot[K comparable, V any](entries []informer.Entry[K, V]) snapshot[K, V] {
	snap := snapshot[K, V]{index: make(map[K]int, len(entries))}
	kept := entries[:0]
	for _, e := range entries {
		e.Revision = 0
		if e.Err != nil {
			var zero V
			e.Value = zero
		}
		if i, dup := snap.index[e.Key]; dup {
			kept[i] = e
			continue
		}
		snap.index[e.Key] = len(kept)
		kept = append(kept, e)
	}
	clear(entries[len(kept):]) // let the dropped duplicates' values go
	snap.entries = kept
	return snap
}

// diff returns the changes from prev to next, numbered from after+1: Puts
// for new and changed keys in next's order, then Deletes with the previous
// value for vanished keys in prev's order. A key that turned bad, or whose
// error changed, is a Put with Err; one that turned good again, a Put.
func (s *Source[K, V]) diff(prev, next snapshot[K, V], after informer.Revision) []informer.Event[K, V] {
	var events []informer.Event[K, V]
	add := func(typ informer.EventType, e informer.Entry[K, V]) {
		after++
		events = append(events, informer.Event[K, V]{Type: typ, Key: e.Key, Value: e.Value, Revision: after, Err: e.Err})
	}
	for _, e := range next.entries {
		if i, ok := prev.index[e.Key]; !ok || changed(prev.entries[i], e, s.equal) {
			add(informer.Put, e)
		}
	}
	for _, e := range prev.entries {
		if _, ok := next.index[e.Key]; !ok {
			// A bad entry's Value is unset: the Delete then carries
			// the zero V, which the informer replaces with its last.
			e.Err = nil
			add(informer.Delete, e)
		}
	}
	return events
}

// changed reports whether a key's entry changed from p to e: its value by
// equal, between good and bad, or its error's text while bad (the error
// is all a bad entry says of its value).
func changed[K comparable, V any](p, e informer.Entry[K, V], equal func(a, b V) bool) bool {
	switch {
	case p.Err == nil && e.Err == nil:
		return !equal(p.Value, e.Value)
	case p.Err != nil && e.Err != nil:
		return p.Err.Error() != e.Err.Error()
	}
	return true
}
