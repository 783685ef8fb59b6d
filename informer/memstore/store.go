package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/informer"
)

// Compile-time proof that a Store is an informer.Store (and so a Source).
var _ informer.Store[string, int] = (*Store[string, int])(nil)

// Store is a versioned, watchable map from K to V. Create one with New; the
// zero value is not usable. All methods are safe for concurrent use. See the
// package documentation for the contracts.
type Store[K comparable, V any] struct {
	// size is the history's capacity, from WithHistory; set by New.
	size uint64
	// conflictRate is WithConflicts' rate; set by New.
	conflictRate float64
	// injected counts the conflicts WithConflicts made.
	injected atomic.Uint64

	mu sync.RWMutex
	// Everything below is guarded by mu.

	// items holds every live key, densely, in the order the keys were
	// created but for deletes, which move the last item into the hole;
	// index maps each key to its position. List copies items in order, so
	// that an informer caches, and a controller visits, keys in the order
	// they are laid out in memory: a list in map order costs every later
	// stage a cache miss per key (measured: twice the time to reconcile
	// 100k listed keys once). Every item's modRev is <= rev. It is kept in
	// blocks, as is log, so that no write copies it whole.
	items blocks[item[K, V]]
	index map[K]int
	// rev is the revision of the latest change, 0 before the first.
	rev informer.Revision
	// log is a ring of the latest changes: the change at revision r is at
	// log.at((r-1)%size) for every r in (floor(), rev]. It grows up to
	// size, then wraps, so a store that is never written costs nothing.
	// Slots at or below floor() hold stale or zeroed changes.
	log blocks[change[K, V]]
	// compacted is the highest revision passed to Compact (clamped to rev
	// at the time); changes at or below it are gone from the history.
	compacted informer.Revision
	// wake is closed, and replaced, by the first write after a watcher
	// started waiting on it; it is never nil. waiting says whether some
	// watcher may be waiting on the current wake, so that writes allocate
	// a new channel only when it wakes someone. It is set by watchers that
	// hold only the read lock, hence atomic; writers, holding the write
	// lock, cannot miss it.
	wake    chan struct{}
	waiting atomic.Bool
	// conflicts draws WithConflicts' conflicts; nil at rate 0.
	conflicts *rand.Rand
}

// item is a live key, its value and its mod revision.
type item[K comparable, V any] struct {
	key    K
	value  V
	modRev informer.Revision
}

// change is one entry of the history: what a revision did.
type change[K comparable, V any] struct {
	typ informer.EventType // Put or Delete
	// created says that a Put made the key (it did not exist before), so
	// that ListAt knows the key's state before it; it fits in typ's
	// padding.
	created bool
	key     K
	value   V // the new value, or for a Delete the deleted one
	rev     informer.Revision
}

// New returns an empty store at revision 0, configured by opts. It returns
// an error naming the option for a nil option or a value that cannot work
// (a history below 1, a conflict rate outside [0, 1]).
func New[K comparable, V any](opts ...Option) (*Store[K, V], error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Store[K, V]{
		size:         uint64(o.history),
		conflictRate: o.conflictRate,
		index:        make(map[K]int),
		wake:         make(chan struct{}),
	}
	if o.conflictRate > 0 {
		s.conflicts = rand.New(rand.NewPCG(o.conflictSeed, 0))
	}
	return s, nil
}

// InjectedConflicts returns how many conflicts WithConflicts has made so
// far: 0 for a store without it.
func (s *Store[K, V]) InjectedConflicts() uint64 { return s.injected.Load() }

// injectConflict draws whether this compare-and-swap write fails, and if
// so returns the error. s.mu must be held for writing, which orders the
// draws.
func (s *Store[K, V]) injectConflict(op string, key K) error {
	if s.conflicts == nil || s.conflicts.Float64() >= s.conflictRate {
		return nil
	}
	s.injected.Add(1)
	return fmt.Errorf("memstore: %s %v: injected conflict (WithConflicts): %w", op, key, informer.ErrConflict)
}

// Get returns key's value and mod revision (the revision of the write that
// set it, above 0), or ok false and a nil error if key does not exist. It
// fails only with ctx's error, if ctx is done: the store does no I/O, and
// checks ctx first so that it behaves as every informer.ReadWriter does.
func (s *Store[K, V]) Get(ctx context.Context, key K) (v V, rev informer.Revision, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, 0, false, err
	}
	s.mu.RLock()
	it, ok := s.get(key)
	s.mu.RUnlock()
	return it.value, it.modRev, ok, nil
}

// get returns key's item. s.mu must be held.
func (s *Store[K, V]) get(key K) (item[K, V], bool) {
	i, ok := s.index[key]
	if !ok {
		return item[K, V]{}, false
	}
	return *s.items.at(i), true
}

// Put sets key to v, whatever its current state, and returns the new
// revision, which is also key's mod revision from now on.
func (s *Store[K, V]) Put(key K, v V) informer.Revision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(key, v)
}

// Create sets key to v only if key does not exist, and returns the write's
// revision. If key exists it writes nothing and returns an error wrapping
// informer.ErrConflict. A done ctx fails it, before anything is written.
func (s *Store[K, V]) Create(ctx context.Context, key K, v V) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.injectConflict("create", key); err != nil {
		return 0, err
	}
	if it, ok := s.get(key); ok {
		return 0, fmt.Errorf("memstore: create %v: key exists at revision %d: %w", key, it.modRev, informer.ErrConflict)
	}
	return s.put(key, v), nil
}

// Update sets key to v only if its mod revision is still rev, and returns
// the write's revision (above rev). Otherwise, key changed, is gone, or rev
// is 0 (which never matches: use Create), it writes nothing and returns an
// error wrapping informer.ErrConflict.
//
// That is the read-modify-write loop of a controller: Get a value and its
// revision, compute the new value, Update at that revision, and on a
// conflict Get again, so that no concurrent writer's change is lost. A done
// ctx fails it, before anything is written.
func (s *Store[K, V]) Update(ctx context.Context, key K, v V, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.injectConflict("update", key); err != nil {
		return 0, err
	}
	if err := s.check(key, rev, "update"); err != nil {
		return 0, err
	}
	return s.put(key, v), nil
}

// Delete removes key. With rev 0 it removes key whatever its revision and
// returns the delete's revision, or 0 and a nil error if key did not exist.
// With rev above 0 it removes key only if its mod revision is still rev,
// and otherwise (key changed or is gone) writes nothing and returns an
// error wrapping informer.ErrConflict. A done ctx fails it, before anything
// is written.
func (s *Store[K, V]) Delete(ctx context.Context, key K, rev informer.Revision) (informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.get(key)
	if rev == 0 {
		if !ok {
			return 0, nil
		}
		return s.remove(key, it.value), nil
	}
	if err := s.injectConflict("delete", key); err != nil {
		return 0, err
	}
	if err := s.check(key, rev, "delete"); err != nil {
		return 0, err
	}
	return s.remove(key, it.value), nil
}

// Revision returns the revision of the latest change: 0 for a new store.
func (s *Store[K, V]) Revision() informer.Revision {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// Len returns the number of keys.
func (s *Store[K, V]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.items.len()
}

// Compact discards the history at and below revision upTo. Afterwards a
// Watch after any revision >= upTo still delivers every later change, and a
// Watch after a revision < upTo returns informer.ErrRevisionExpired (it
// would need the change at upTo, or earlier ones). So Compact(Revision())
// leaves only "from now on" watchable, and Compact(0) does nothing.
//
// upTo beyond the current revision is clamped to it: future changes are
// always kept. Compacting to a revision at or below an earlier compaction
// does nothing. Compact only forgets history: the current values, Get and
// List are unaffected. It releases the discarded changes' values to the
// garbage collector.
//
// WithHistory is the same rule applied on every write at Revision()-n; the
// oldest revision a Watch can start after is the higher of the two.
func (s *Store[K, V]) Compact(upTo informer.Revision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	upTo = min(upTo, s.rev)
	floor := s.floor()
	if upTo <= floor {
		return
	}
	var zero change[K, V]
	for r := floor + 1; r <= upTo; r++ {
		*s.log.at(s.slot(r)) = zero
	}
	s.compacted = upTo
}

// List returns every key and value, and the revision they are the state at.
// The entries come in the order their keys were created, except that each
// delete moved the then last key into the deleted key's place; callers must
// not rely on any order. It is O(n) and holds the read lock for the copy.
func (s *Store[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	entries := make([]informer.Entry[K, V], s.items.len())
	i := 0
	for _, blk := range s.items.b {
		for j := range blk {
			it := &blk[j]
			entries[i] = informer.Entry[K, V]{Key: it.key, Value: it.value, Revision: it.modRev}
			i++
		}
	}
	return entries, s.rev, nil
}

// check returns nil if key exists at revision rev, else a conflict error
// for op. rev 0 never matches: no existing key is at revision 0. s.mu must
// be held.
func (s *Store[K, V]) check(key K, rev informer.Revision, op string) error {
	it, ok := s.get(key)
	switch {
	case ok && it.modRev == rev:
		return nil
	case ok:
		return fmt.Errorf("memstore: %s %v at revision %d: key is at revision %d: %w", op, key, rev, it.modRev, informer.ErrConflict)
	default:
		return fmt.Errorf("memstore: %s %v at revision %d: key does not exist: %w", op, key, rev, informer.ErrConflict)
	}
}

// put sets key to v at a new revision. s.mu must be held for writing.
func (s *Store[K, V]) put(key K, v V) informer.Revision {
	i, ok := s.index[key]
	rev := s.record(change[K, V]{typ: informer.Put, created: !ok, key: key, value: v})
	if ok {
		it := s.items.at(i)
		it.value, it.modRev = v, rev
	} else {
		s.index[key] = s.items.len()
		s.items.push(item[K, V]{key: key, value: v, modRev: rev})
	}
	return rev
}

// remove deletes key, whose value is v, at a new revision. s.mu must be held
// for writing.
func (s *Store[K, V]) remove(key K, v V) informer.Revision {
	rev := s.record(change[K, V]{typ: informer.Delete, key: key, value: v})
	i, last := s.index[key], s.items.len()-1
	if i != last {
		moved := *s.items.at(last)
		*s.items.at(i) = moved
		s.index[moved.key] = i
	}
	s.items.pop() // lets the key and value be collected, and empty blocks
	delete(s.index, key)
	return rev
}

// record gives c the next revision, appends it to the history and wakes the
// watchers. s.mu must be held for writing.
func (s *Store[K, V]) record(c change[K, V]) informer.Revision {
	s.rev++
	c.rev = s.rev
	if i := s.slot(s.rev); i == s.log.len() {
		s.log.push(c)
	} else {
		*s.log.at(i) = c
	}
	if s.waiting.Load() {
		s.waiting.Store(false)
		close(s.wake)
		s.wake = make(chan struct{})
	}
	return s.rev
}

// slot is where the change at revision r lives in log.
func (s *Store[K, V]) slot(r informer.Revision) int {
	return int((uint64(r) - 1) % s.size)
}

// floor is the highest revision no longer in the history: Watch can start
// after floor or any later revision up to rev. s.mu must be held.
func (s *Store[K, V]) floor() informer.Revision {
	f := s.compacted
	if uint64(s.rev) > s.size {
		f = max(f, s.rev-informer.Revision(s.size))
	}
	return f
}
