package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// ErrStopped is returned by AddHandler after Run has returned, and by
// WaitForSync when Run returned before the informer synced.
var ErrStopped = errors.New("informer: stopped")

// runState is where an Informer is in its one life.
type runState uint8

const (
	notStarted runState = iota
	running
	stopped
)

// Informer keeps a local, indexed cache in step with a Source and tells
// handlers about changes. Create one with New, add handlers, then Run it.
// All methods are safe for concurrent use. See the package documentation
// for the contracts.
type Informer[K comparable, V any] struct {
	// Set by New and only read afterwards.
	name      string
	src       Source[K, V]
	resync    time.Duration
	backoff   backoff.Exponential
	clock     clock.WithTicker
	log       *slog.Logger
	transform func(V) V // nil: none

	// cacheSynced is closed when the first list has been stored;
	// done is closed when Run returns.
	cacheSynced chan struct{}
	done        chan struct{}
	// synced latches HasSynced's answer once it is true.
	synced atomic.Bool

	stats stats
	// badLog rate-limits the lines about bad values (badlog.go).
	badLog badLog

	// wg counts the goroutines Run started (dispatchers, resync) and the
	// AfterRevision callbacks running. Add is only called with mu held and
	// state != stopped, and Run waits only after setting state = stopped,
	// so no Add can race with the Wait.
	wg sync.WaitGroup

	mu sync.RWMutex
	// Everything below is guarded by mu. Changes are pushed to listeners
	// with mu held for writing, so that every listener sees the cache's
	// changes in the order they were made, and a handler added later gets
	// a replay of the cache, interleaved with the changes made meanwhile
	// by the rules in replay.go, that takes it to the cache's state.

	cache *cache[K, V]
	// listeners are the handlers' buffers, in order of AddHandler.
	listeners []*listener[K, V]
	// syncListeners are the listeners registered when the first list was
	// stored: HasSynced waits for them to deliver it.
	syncListeners []*listener[K, V]
	// lastRev is the highest revision seen: the last list's, or the
	// highest of any event since.
	lastRev Revision
	// resumeRev is the revision a new watch starts after: the highest one
	// known to have been received in full. Changes sharing a revision may
	// arrive one by one, so a watch that fails after some of them must
	// not skip the rest: an event's revision is complete only once a
	// higher one arrives (or a bookmark, or a list, says so). Resuming
	// re-sends what was received of the last revision; those duplicates
	// are skipped by revision.
	resumeRev Revision
	isCached  bool // the first list has been stored
	// bad holds the keys whose latest value could not be taken (see
	// BadKey); nil until the first.
	bad   map[K]BadKey[K]
	state runState
	// waiters are the WaitForRevision and AfterRevision calls waiting for
	// lastRev to reach their revision (revision.go); waiterSeq numbers
	// them in order of arrival.
	waiters   waiterHeap
	waiterSeq uint64
}

// New returns an informer named name (for errors and logs) that follows
// src. It returns an error naming the informer and the option for a nil src
// (or a nil pointer, map, channel or function that implements Source), a nil
// option, options built for other key or value types, and duplicate or nil
// indexes, which would otherwise surface only when Run fails on another
// goroutine.
func New[K comparable, V any](name string, src Source[K, V], opts ...Option) (*Informer[K, V], error) {
	if isNil(src) {
		return nil, fmt.Errorf("informer.New(%q): nil Source %T", name, src)
	}
	var c config
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("informer.New(%q): option %d is nil", name, i)
		}
		o(&c)
	}
	transform, err := optionFor[func(V) V]("WithTransform", c.transform)
	if err != nil {
		return nil, fmt.Errorf("informer.New(%q): %w", name, err)
	}
	inf := &Informer[K, V]{
		name:        name,
		src:         src,
		resync:      c.resync,
		backoff:     defaultWatchBackoff,
		clock:       c.clock,
		log:         c.logger,
		transform:   transform,
		cacheSynced: make(chan struct{}),
		done:        make(chan struct{}),
	}
	if c.backoff != nil {
		inf.backoff = *c.backoff
	}
	if inf.clock == nil {
		inf.clock = clock.RealClock{}
	}
	if inf.log == nil {
		inf.log = slog.Default()
	}
	inf.log = inf.log.With("informer", name)
	inf.cache = newCache[K, V]()
	for _, ix := range c.indexes {
		fn, err := optionFor[IndexFunc[K, V]](fmt.Sprintf("WithIndex(%q)", ix.name), ix.fn)
		if err != nil {
			return nil, fmt.Errorf("informer.New(%q): %w", name, err)
		}
		if fn == nil {
			return nil, fmt.Errorf("informer.New(%q): WithIndex(%q): nil IndexFunc", name, ix.name)
		}
		if inf.cache.hasIndex(ix.name) {
			return nil, fmt.Errorf("informer.New(%q): WithIndex(%q): duplicate index name", name, ix.name)
		}
		if err := inf.cache.addIndex(ix.name, fn); err != nil {
			return nil, fmt.Errorf("informer.New(%q): WithIndex(%q): %w", name, ix.name, err)
		}
	}
	return inf, nil
}

// isNil reports whether src is nil, or a nil value of a kind whose methods
// could not work on nil.
func isNil(src any) bool {
	if src == nil {
		return true
	}
	switch v := reflect.ValueOf(src); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func:
		return v.IsNil()
	}
	return false
}

// Name returns the informer's name.
func (inf *Informer[K, V]) Name() string { return inf.name }

// Run lists the source, fills the cache, and then watches it and keeps the
// cache and the handlers up to date until ctx is done: it resumes a failed
// watch from the last revision seen, after a backoff, and lists again when
// that revision has expired. It never gives up on a failing source; see
// Stats for how it is doing.
//
// Run returns nil once ctx is done and every goroutine it started (the
// handlers' dispatchers, the resync ticker) has returned, so it waits for
// handler calls in progress. Changes not yet delivered are dropped. An
// informer runs once: a second call returns an error at once.
func (inf *Informer[K, V]) Run(ctx context.Context) error {
	inf.mu.Lock()
	if inf.state != notStarted {
		inf.mu.Unlock()
		return fmt.Errorf("informer %q: Run called twice", inf.name)
	}
	inf.state = running
	for _, l := range inf.listeners {
		inf.startLocked(l)
	}
	if inf.resync > 0 {
		inf.wg.Add(1)
		go inf.resyncLoop(ctx)
	}
	inf.mu.Unlock()

	inf.reflect(ctx)

	inf.mu.Lock()
	inf.state = stopped
	inf.dropWaitersLocked()
	// A copy: removeListener compacts inf.listeners in place.
	listeners := slices.Clone(inf.listeners)
	inf.mu.Unlock()
	inf.stopBadLog()
	for _, l := range listeners {
		l.halt(false)
	}
	inf.wg.Wait()
	close(inf.done)
	return nil
}

// startLocked starts l's dispatcher. mu must be held, with state running.
func (inf *Informer[K, V]) startLocked(l *listener[K, V]) {
	l.started = true
	inf.wg.Add(1)
	go func() {
		defer inf.wg.Done()
		l.run()
	}()
}

// HasSynced reports whether the first full list has been delivered: the
// cache holds it, and every handler added before it was stored has been
// given all of its entries (each handler's Registration.HasSynced is
// true). Handlers added later do not hold it up; use their Registration's
// HasSynced. It stays true once true, through relists and restarts of the
// watch.
func (inf *Informer[K, V]) HasSynced() bool {
	if inf.synced.Load() {
		return true
	}
	inf.mu.RLock()
	ok := inf.isCached
	listeners := inf.syncListeners
	inf.mu.RUnlock()
	if !ok {
		return false
	}
	for _, l := range listeners {
		if !l.hasSynced() {
			return false
		}
	}
	inf.synced.Store(true)
	return true
}

// WaitForSync blocks until HasSynced is true (it returns nil), ctx is done,
// or Run returns first (it returns an error wrapping ErrStopped). Unlike
// client-go's WaitForCacheSync it does not poll.
func (inf *Informer[K, V]) WaitForSync(ctx context.Context) error {
	if err := inf.waitClosed(ctx, inf.cacheSynced, "sync"); err != nil {
		return err
	}
	inf.mu.RLock()
	listeners := inf.syncListeners
	inf.mu.RUnlock()
	for _, l := range listeners {
		if err := inf.waitClosed(ctx, l.synced, "sync"); err != nil {
			return err
		}
	}
	inf.synced.Store(true)
	return nil
}

// WaitForCache blocks until the cache holds the first full list (it
// returns nil), ctx is done, or Run returns first (it returns an error
// wrapping ErrStopped). Unlike WaitForSync it does not wait for handlers
// to be given the list: a controller's workers start on the first keys
// its handler queues, and their reads of the cache already see every
// listed object.
func (inf *Informer[K, V]) WaitForCache(ctx context.Context) error {
	return inf.waitClosed(ctx, inf.cacheSynced, "cache")
}

// waitClosed waits for ch to be closed, ctx to be done or Run to return;
// what names the wait in the error.
func (inf *Informer[K, V]) waitClosed(ctx context.Context, ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("informer %q: wait for %s: %w", inf.name, what, ctx.Err())
	case <-inf.done:
		select {
		case <-ch: // both ready: it did get there
			return nil
		default:
			return fmt.Errorf("informer %q: wait for %s: %w", inf.name, what, ErrStopped)
		}
	}
}

// Get returns the cached value for key. For a bad key (see BadKey) that is
// its last good value, if it had one.
func (inf *Informer[K, V]) Get(key K) (V, bool) {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	it, ok := inf.cache.get(key)
	return it.value, ok
}

// List returns every cached entry, in no particular order, each with the
// key's cached revision (see Entry.Revision); a bad key (see BadKey) with
// its last good value, if it had one. The slice is the caller's; the
// values are shared with the cache and other readers, so treat them as
// read-only.
func (inf *Informer[K, V]) List() []Entry[K, V] {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return inf.cache.entries()
}

// ByIndex returns the cached entries that the index named index files under
// value, in no particular order, each with its revision as in List; none
// if there are none. It panics if the informer has no index of that name
// (given to New with WithIndex, or added with AddIndex): an unknown name
// is a typo, or an index added too late, that an empty answer would hide.
// Check names up front with HasIndex.
func (inf *Informer[K, V]) ByIndex(index, value string) []Entry[K, V] {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return inf.cache.byIndex(index, value)
}

// HasIndex reports whether the informer has an index named name (see
// WithIndex and AddIndex), that is whether ByIndex accepts it, so that a
// caller that will query an index later (a mapper on another informer's
// handler, say) can check the name once, when it is set up, instead of
// panicking on the first change.
func (inf *Informer[K, V]) HasIndex(name string) bool {
	// The read lock: AddIndex may add one at any time.
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return inf.cache.hasIndex(name)
}

// Len returns the number of cached entries.
func (inf *Informer[K, V]) Len() int {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return inf.cache.len()
}

// LastRevision returns the highest revision the informer has seen: the
// last list's, or the highest revision of any event or bookmark since.
// WaitForRevision and AfterRevision wait for it to reach a revision.
func (inf *Informer[K, V]) LastRevision() Revision {
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	return inf.lastRev
}
