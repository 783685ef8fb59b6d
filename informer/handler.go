package informer

// Handler receives an informer's changes. Each handler has a goroutine of
// its own, which calls its methods one at a time, in the order the changes
// reached the handler's buffer; different handlers run concurrently, and a
// slow one delays only itself.
//
// Changes to one key that the handler has not yet been given are coalesced
// (see the package documentation for the exact rules): a handler may miss
// intermediate values, but it always ends up told the latest state of every
// key, and the old values it is given are the ones it was last told. A
// handler should therefore act on the key and current state, as a
// level-triggered controller does, not count events.
//
// A method that blocks stalls this handler's deliveries, and Informer.Run
// and Registration.Remove do not return until the call in progress has
// returned.
//
// A method that panics does not take the process down: the informer
// recovers the panic, logs it with its stack, counts it (Stats.Panics) and
// goes on with the handler's next change. The change that panicked counts
// as delivered: the handler is not given it again, so its view of that key
// is whatever the method got done; the key's next change, a resync
// (WithResync) or a relist brings it up to date. (A panic is a bug to fix;
// recovering only keeps one bad key from stopping every other.)
type Handler[K comparable, V any] interface {
	// OnAdd: key is new to this handler, with value v. initialList is true
	// when the add comes from the informer's first list, or from the replay
	// of the cache to a handler added after it, and the key has not changed
	// since: a controller can queue such keys at a low priority so that
	// fresh changes go first.
	OnAdd(key K, v V, initialList bool)
	// OnUpdate: key changed from old (the value this handler was last
	// given) to new. resync is true when no watch event for the key is in
	// this update: a periodic resync re-delivered the cached value (old
	// and new are then the same value), or a relist after an expired
	// revision found the key still present (new may then differ from old
	// by changes the watch missed, or not at all). A handler that reacts
	// to changes only (cancelling work in flight, say) can ignore resync
	// updates; a level-triggered one treats them like any other.
	OnUpdate(key K, old, new V, resync bool)
	// OnDelete: key is gone. last is the last value the informer held for
	// it, which may be newer than the last value this handler was given.
	OnDelete(key K, last V)
}

// RevisionHandler is implemented by a Handler that wants the store revision
// of each change it is given, to say in a log line or a trace which write
// it acts on. AddHandler checks for it once; a handler that implements it
// has ChangeRevision called on its delivery goroutine right before each
// OnAdd, OnUpdate and OnDelete, with the revision of the change that call
// delivers:
//
//   - a watch event: the event's own revision, not the informer's
//     LastRevision, which may be higher by the time the change is
//     delivered;
//   - several changes to the key coalesced into one call: the latest's;
//   - a list or a relist (initial adds, a relist's updates, and deletes of
//     keys it found gone): the list's revision;
//   - a resync (WithResync) or the replay of the cache to a handler added
//     late: the key's cached revision (see Entry.Revision).
//
// A panic in ChangeRevision is recovered and counted as one in the method
// it precedes, which is then not called; the change counts as delivered
// (see Handler).
type RevisionHandler interface {
	ChangeRevision(rev Revision)
}

// HandlerFuncs adapts functions to a Handler. A nil field ignores that kind
// of change.
type HandlerFuncs[K comparable, V any] struct {
	AddFunc    func(key K, v V, initialList bool)
	UpdateFunc func(key K, old, new V, resync bool)
	DeleteFunc func(key K, last V)
}

// OnAdd calls AddFunc if it is set.
func (f HandlerFuncs[K, V]) OnAdd(key K, v V, initialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(key, v, initialList)
	}
}

// OnUpdate calls UpdateFunc if it is set.
func (f HandlerFuncs[K, V]) OnUpdate(key K, old, new V, resync bool) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(key, old, new, resync)
	}
}

// OnDelete calls DeleteFunc if it is set.
func (f HandlerFuncs[K, V]) OnDelete(key K, last V) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(key, last)
	}
}

// Registration is a handler added with Informer.AddHandler.
type Registration[K comparable, V any] struct {
	inf *Informer[K, V]
	l   *listener[K, V]
}

// HasSynced reports whether the handler has been given its initial state:
// every add of the informer's first list (for a handler added before the
// informer synced) or of the replay of the cache (for one added later) has
// been delivered, meaning the handler's method returned, or the change was
// coalesced into a later one that was delivered. It stays true once true.
// A removed handler counts as synced.
func (r *Registration[K, V]) HasSynced() bool { return r.l.hasSynced() }

// Remove stops deliveries to the handler: changes not yet delivered are
// dropped, and a call in progress is waited for. Once Remove returns, the
// handler is not running and is never called again, so whatever it
// touches can be reused or torn down. Removing twice is a no-op.
//
// Because it waits, Remove must not be called from inside the handler's
// own methods (that call would wait for itself, forever), nor while
// holding a lock that a method of the handler may be waiting for.
func (r *Registration[K, V]) Remove() { r.inf.removeListener(r.l) }

// Idle reports whether the handler has been given every change the informer
// has applied so far: nothing is waiting in its buffer and no call is in
// progress. Together with LastRevision it tells a test harness that a write
// to the store has reached the handler: once LastRevision is at or past the
// write's revision and Idle is true, the handler's method for it has returned.
// A removed handler is idle.
func (r *Registration[K, V]) Idle() bool { return r.l.idle() }
