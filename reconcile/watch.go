package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/workqueue"
)

// Cache is the part of an informer that controllers and the Manager use
// without knowing its types: *informer.Informer[K, V] implements it, and
// every method has the contract of the Informer method of that name.
//
// A controller starts its workers once WaitForCache returns for every
// informer it watches, so that they reconcile the first listed keys while
// its handlers still queue the rest; the Manager's readiness uses
// HasSynced. An implementation whose cache cannot be read before its
// handlers have been given the first list can implement WaitForCache as
// WaitForSync: workers then start later, never wrongly.
type Cache interface {
	Name() string
	Run(ctx context.Context) error
	HasSynced() bool
	// WaitForSync blocks until HasSynced is true (nil), ctx is done or
	// Run has returned without syncing (an error).
	WaitForSync(ctx context.Context) error
	// WaitForCache blocks until the cache holds the first full list, which
	// reads (Get, List) then see, even if handlers have not been given it
	// yet (nil); or until ctx is done or Run has returned first (an error).
	WaitForCache(ctx context.Context) error
}

// ChangeKind says what happened to a watched key.
type ChangeKind uint8

const (
	// Added: the key is new to the controller (created, or listed when the
	// controller started).
	Added ChangeKind = iota + 1
	// Updated: the key's value changed, or was re-delivered unchanged by a
	// resync or a relist.
	Updated
	// Deleted: the key is gone.
	Deleted
)

// String returns "added", "updated" or "deleted".
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one change to a watched key, as predicates see it.
type Change[K comparable, V any] struct {
	Kind ChangeKind
	Key  K
	// Old is the previous value for Updated, the last value for Deleted,
	// and zero for Added.
	Old V
	// New is the new value for Added and Updated, and zero for Deleted.
	New V
	// InitialList is true for an Added that comes from the informer's
	// list when the controller started, not from a fresh change.
	InitialList bool
	// Resync is true for an Updated that no fresh change went into: a
	// periodic resync re-delivered the key unchanged, or a relist after an
	// expired revision found it still present (its value may then differ
	// by changes the watch missed). See informer.Handler's OnUpdate.
	Resync bool
}

// Predicate decides whether a change is worth reconciling for. Predicates
// filter events, never state: a change they drop is not lost for good,
// because the next change to the key, a resync, or a restart of the
// controller reconciles the key from current state anyway.
type Predicate[K comparable, V any] func(Change[K, V]) bool

// IgnoreUnchanged drops updates whose old and new values are equal by equal,
// such as those of a resync, or writes that only touched a status the
// controller itself maintains (compare just the spec). A nil equal gives a
// nil Predicate, which For and Watch reject.
func IgnoreUnchanged[K comparable, V any](equal func(old, new V) bool) Predicate[K, V] {
	if equal == nil {
		return nil
	}
	return func(c Change[K, V]) bool {
		return c.Kind != Updated || !equal(c.Old, c.New)
	}
}

// For watches the controller's primary informer: every change to a key
// reconciles that same key, if every predicate lets the change through. inf's
// key type must be the controller's, and no predicate may be nil, or New
// fails.
func For[K comparable, V any](inf *informer.Informer[K, V], preds ...Predicate[K, V]) Option {
	return func(s *settings) error {
		if inf == nil {
			return fmt.Errorf("For: nil informer")
		}
		if i := slices.IndexFunc(preds, func(p Predicate[K, V]) bool { return p == nil }); i >= 0 {
			return fmt.Errorf("For(informer %q): predicate %d is nil", inf.Name(), i)
		}
		s.watches = append(s.watches, &informerWatch[K, K, V]{inf: inf, same: func(k K) K { return k }, preds: preds})
		return nil
	}
}

// Watch watches a secondary informer whose changes matter to other keys:
// every change to one of its keys reconciles the keys toKeys returns for it
// (for an update, for the old value and the new one, since a change of owner
// matters to both). Typical toKeys return the owner named in the value, or
// look keys up in the primary informer's index (see ByIndex). toKeys must
// return keys of the controller's key type K, and no predicate may be nil,
// or New fails. toKeys and the predicates run on the informer's delivery
// goroutine for this controller, so they must be quick; a panic in one is
// recovered, logged with its stack and counted in
// converge_watch_panics_total, and that change is dropped.
func Watch[K comparable, WK comparable, WV any](inf *informer.Informer[WK, WV], toKeys func(key WK, v WV) []K, preds ...Predicate[WK, WV]) Option {
	return func(s *settings) error {
		if inf == nil || toKeys == nil {
			return fmt.Errorf("watch: nil informer or key function")
		}
		if i := slices.IndexFunc(preds, func(p Predicate[WK, WV]) bool { return p == nil }); i >= 0 {
			return fmt.Errorf("Watch(informer %q): predicate %d is nil", inf.Name(), i)
		}
		s.watches = append(s.watches, &informerWatch[K, WK, WV]{inf: inf, toKeys: toKeys, preds: preds})
		return nil
	}
}

// ByIndex returns a key function for Watch that finds the primary keys to
// reconcile in the primary informer's index: the keys of every entry filed
// under value(key, v) in the index named index.
//
// It panics at once if primary is nil, has no index of that name, or value
// is nil: index names are fixed when the informer is built, so this is a
// typo, and it should stop the program where it is written, at start-up,
// rather than drop every change on the informer's delivery goroutine.
func ByIndex[K comparable, V any, WK comparable, WV any](primary *informer.Informer[K, V], index string, value func(key WK, v WV) string) func(WK, WV) []K {
	switch {
	case primary == nil:
		panic(fmt.Sprintf("reconcile.ByIndex(nil, %q): nil informer", index))
	case !primary.HasIndex(index):
		panic(fmt.Sprintf("reconcile.ByIndex: informer %q has no index named %q (give it with informer.WithIndex)", primary.Name(), index))
	case value == nil:
		panic(fmt.Sprintf("reconcile.ByIndex(informer %q, %q): nil value function", primary.Name(), index))
	}
	return func(key WK, v WV) []K {
		entries := primary.ByIndex(index, value(key, v))
		keys := make([]K, len(entries))
		for i, e := range entries {
			keys[i] = e.Key
		}
		return keys
	}
}

// FromFunc adds a source of keys that is not an informer: run is started
// with the controller's Run and is given enqueue to reconcile keys with,
// and must return when ctx is done. ctx carries the values of Run's context
// (under a Manager, the leader's term: leader.TermFromContext). It suits
// webhooks, timers and other external triggers. An error from run other
// than ctx's ends Run with that error. K must be the controller's key type,
// or New fails.
func FromFunc[K comparable](name string, run func(ctx context.Context, enqueue func(K)) error) Option {
	return func(s *settings) error {
		if run == nil {
			return fmt.Errorf("FromFunc(%q): nil function", name)
		}
		s.watches = append(s.watches, &funcWatch[K]{name: name, run: run})
		return nil
	}
}

// FromChannel reconciles every key received on ch, until ch is closed or
// the controller stops. Nothing receives from ch while the controller is not
// running (under a Manager with leader election: while this replica is not
// the leader), so a producer that must not block should send with a select
// or use a buffered channel. K must be the controller's key type, or New
// fails.
func FromChannel[K comparable](name string, ch <-chan K) Option {
	if ch == nil {
		return func(*settings) error { return fmt.Errorf("FromChannel(%q): nil channel", name) }
	}
	return FromFunc(name, func(ctx context.Context, enqueue func(K)) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case k, ok := <-ch:
				if !ok {
					return nil
				}
				enqueue(k)
			}
		}
	})
}

// watch is a source of keys for a Controller[K]; each Run starts it, and
// stops it when the Run ends.
type watch[K comparable] interface {
	// describe names the source in errors and logs.
	describe() string
	// cache is the informer watched, or nil.
	cache() Cache
	// start begins delivering keys to r, and returns how to stop.
	start(r *run[K]) (stop func(), err error)
}

// checkWatch turns an option's watch into a watch[K], or explains why its
// key type is not the controller's.
func checkWatch[K comparable](w any) (watch[K], error) {
	if ww, ok := w.(watch[K]); ok {
		return ww, nil
	}
	d, _ := w.(interface{ describe() string })
	want := reflect.TypeFor[K]()
	if d == nil {
		return nil, fmt.Errorf("a watch for keys of another type than %v", want)
	}
	return nil, fmt.Errorf("%s delivers keys of another type than the controller's %v", d.describe(), want)
}

type informerWatch[K comparable, WK comparable, WV any] struct {
	inf *informer.Informer[WK, WV]
	// Exactly one of same and toKeys is set: same (For) maps a key to
	// itself, without the slice toKeys would allocate per change.
	same   func(WK) K
	toKeys func(WK, WV) []K
	preds  []Predicate[WK, WV]
	// index is the watch's place among the controller's, for its
	// trigger reasons; set by New.
	index int
}

func (w *informerWatch[K, WK, WV]) setIndex(i int) { w.index = i }

func (w *informerWatch[K, WK, WV]) describe() string {
	return fmt.Sprintf("informer %q", w.inf.Name())
}

func (w *informerWatch[K, WK, WV]) cache() Cache { return w.inf }

func (w *informerWatch[K, WK, WV]) start(r *run[K]) (func(), error) {
	if n, ok := w.listKeys(r); ok {
		// An informer that has cached its list already replays it to the
		// handler, one key to queue per entry: room for them all at once
		// spares the queue growing step by step (growForLists ends the
		// reservation).
		r.q.Grow(n)
	}
	reg, err := w.inf.AddHandler(&watchHandler[K, WK, WV]{w: w, r: r})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.describe(), err)
	}
	r.track(w.inf, reg, reg.AfterRevision)
	return reg.Remove, nil
}

// listKeys returns how many keys the informer's cached list queues, one
// per entry, for a watch that maps a key to itself; false for a mapped
// watch, which may queue any number, and under sharding, where most keys
// are another replica's.
func (w *informerWatch[K, WK, WV]) listKeys(r *run[K]) (int, bool) {
	if w.same == nil || r.c.shards != nil {
		return 0, false
	}
	return w.inf.Len(), true
}

func (w *informerWatch[K, WK, WV]) revisioned() informer.Revisioned { return w.inf }

// watchHandler is an informerWatch's handler for one run. It is an
// informer.RevisionHandler, so that a trigger reason records the revision
// of the change that queued the key.
type watchHandler[K comparable, WK comparable, WV any] struct {
	w *informerWatch[K, WK, WV]
	r *run[K]
	// rev is the revision of the change being delivered; set and read on
	// the informer's delivery goroutine only.
	rev informer.Revision
}

func (h *watchHandler[K, WK, WV]) ChangeRevision(rev informer.Revision) { h.rev = rev }

func (h *watchHandler[K, WK, WV]) OnAdd(key WK, v WV, initial bool) {
	h.w.deliver(h.r, Change[WK, WV]{Kind: Added, Key: key, New: v, InitialList: initial}, h.rev)
}

func (h *watchHandler[K, WK, WV]) OnUpdate(key WK, old, new WV, resync bool) {
	h.w.deliver(h.r, Change[WK, WV]{Kind: Updated, Key: key, Old: old, New: new, Resync: resync}, h.rev)
}

func (h *watchHandler[K, WK, WV]) OnDelete(key WK, last WV) {
	h.w.deliver(h.r, Change[WK, WV]{Kind: Deleted, Key: key, Old: last}, h.rev)
}

// deliver turns one change, made at revision rev, into keys to reconcile.
// A panic in a
// predicate, in toKeys, or in the queue (a key that cannot be used) is
// recovered: the process and the other keys must not pay for one bad
// change.
func (w *informerWatch[K, WK, WV]) deliver(r *run[K], c Change[WK, WV], rev informer.Revision) {
	defer recoverWatch(r, w, c.Key)
	for _, p := range w.preds {
		if !p(c) {
			return
		}
	}
	ev := enqueueEvent{prio: workqueue.PriorityNormal, change: !(c.Kind == Updated && c.Resync)}
	if c.InitialList {
		ev.prio = workqueue.PriorityLow
	}
	if r.reasons {
		kind := TriggerChange
		switch {
		case c.InitialList:
			kind = TriggerInitialList
		case !ev.change:
			kind = TriggerResync
		}
		ev.why = workqueue.Reason{What: reasonWhat(kind, c.Kind, w.index)}
		if kind != TriggerInitialList { // a list's revision says nothing about a key
			ev.why.Rev = uint64(rev)
		}
	}
	if w.same != nil {
		r.enqueue(ev, w.same(c.Key))
		return
	}
	switch c.Kind {
	case Added:
		r.enqueueAll(ev, w.toKeys(c.Key, c.New))
	case Deleted:
		r.enqueueAll(ev, w.toKeys(c.Key, c.Old))
	case Updated:
		oldKeys, newKeys := w.toKeys(c.Key, c.Old), w.toKeys(c.Key, c.New)
		r.enqueueAll(ev, newKeys)
		// Queueing a key twice is a no-op, so only the old keys'
		// order matters here, not whether they repeat a new key; but
		// enqueueing with a change may cancel a reconcile in flight
		// twice, which is harmless.
		r.enqueueAll(ev, missingFrom(oldKeys, newKeys))
	}
}

// missingFrom returns the keys of from that are not in in. It is linear in
// their lengths for the long slices that index lookups return, and avoids
// a map for the one or two keys an owner mapping returns.
func missingFrom[K comparable](from, in []K) []K {
	if len(from) == 0 {
		return nil
	}
	if len(from)*len(in) <= 64 {
		var out []K
		for _, k := range from {
			if !slices.Contains(in, k) {
				out = append(out, k)
			}
		}
		return out
	}
	set := make(map[K]struct{}, len(in))
	for _, k := range in {
		set[k] = struct{}{}
	}
	var out []K
	for _, k := range from {
		if _, ok := set[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

type funcWatch[K comparable] struct {
	name string
	run  func(ctx context.Context, enqueue func(K)) error
	// index is as informerWatch's.
	index int
}

func (w *funcWatch[K]) setIndex(i int) { w.index = i }

func (w *funcWatch[K]) describe() string { return fmt.Sprintf("source %q", w.name) }
func (w *funcWatch[K]) cache() Cache     { return nil }

func (w *funcWatch[K]) start(r *run[K]) (func(), error) {
	// Run's values (a leader's term), but stopped by stop, not by Run's
	// context: serve stops its sources after the workers.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.workCtx))
	done := make(chan struct{})
	ev := enqueueEvent{prio: workqueue.PriorityNormal, change: true}
	if r.reasons {
		ev.why = workqueue.Reason{What: reasonWhat(TriggerSource, 0, w.index)}
	}
	enqueue := func(k K) {
		defer recoverWatch(r, w, k)
		r.c.noteSourced(k)
		r.enqueue(ev, k)
	}
	go func() {
		defer close(done)
		err := w.run(ctx, enqueue)
		if err != nil && ctx.Err() == nil {
			r.fail(fmt.Errorf("%s: %w", w.describe(), err))
		}
	}()
	return func() { cancel(); <-done }, nil
}
