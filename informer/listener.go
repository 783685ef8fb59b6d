package informer

import "sync"

// changeKind is what a pending change will deliver to a handler.
type changeKind uint8

const (
	// kindNone delivers nothing: the key was added and deleted again
	// before the handler was told of it. The entry keeps its place in
	// line so that a key flapping while the handler is slow cannot grow
	// the line.
	kindNone changeKind = iota
	kindAdd
	kindUpdate
	kindDelete
)

// change is one change to a key, or several coalesced into one.
type change[V any] struct {
	kind changeKind
	// old is the value the handler was last given (kindUpdate and
	// kindDelete only).
	old V
	// cur is the latest value for kindAdd and kindUpdate, and the last
	// known value for kindDelete.
	cur V
	// initialList is set on kindAdd from the first list or a replay.
	initialList bool
	// resync is set on a kindUpdate that no watch event went into: a
	// resync or a relist re-delivered the key (Handler.OnUpdate).
	resync bool
	// rev is the store revision of the change, of the latest one when
	// several were coalesced (RevisionHandler).
	rev Revision
}

// merge coalesces next, a change the cache made after p, into p, such that
// delivering the result takes the handler from the state it has to the
// cache's latest state for the key:
//
//	pending          next            result
//	add v1           update → v2     add v2 (initialList cleared)
//	add v1           delete          nothing (the handler never had the key)
//	update o → v1    update → v2     update o → v2 (resync only if both were)
//	update o → v1    delete v2       delete v2 (the last known value)
//	delete last      add v2          update o → v2 (o: what the handler had)
//	nothing          add v2          add v2
//
// A delete followed by an add becomes an update, not a delete and an add,
// so that a key costs one entry however often it flaps; a handler that
// must notice re-creation can compare identities in old and new. Other
// combinations cannot come from a consistent cache; they are merged the
// same way by the kind of the pending change.
//
// The result carries next's revision: the latest change's.
func merge[V any](p, next change[V]) change[V] {
	switch p.kind {
	case kindNone:
		if next.kind == kindDelete {
			return change[V]{kind: kindNone, rev: next.rev}
		}
		return change[V]{kind: kindAdd, cur: next.cur, initialList: next.kind == kindAdd && next.initialList, rev: next.rev}
	case kindAdd:
		if next.kind == kindDelete {
			return change[V]{kind: kindNone, rev: next.rev}
		}
		return change[V]{kind: kindAdd, cur: next.cur, initialList: p.initialList && next.kind == kindAdd && next.initialList, rev: next.rev}
	default: // kindUpdate, kindDelete: the handler has the key, with p.old
		if next.kind == kindDelete {
			return change[V]{kind: kindDelete, old: p.old, cur: next.cur, rev: next.rev}
		}
		// A delete then an add is a change, whatever delivered the add.
		resync := p.kind == kindUpdate && p.resync && next.resync
		return change[V]{kind: kindUpdate, old: p.old, cur: next.cur, resync: resync, rev: next.rev}
	}
}

// listener is one handler's buffer of pending changes and the state of its
// dispatcher goroutine. The informer pushes changes under its own lock;
// the dispatcher takes them under the listener's lock only, so that a slow
// handler never holds up the informer.
type listener[K comparable, V any] struct {
	h Handler[K, V]
	// rh is h if it is a RevisionHandler, else nil.
	rh RevisionHandler
	// panicked reports a panic recovered from h's method for key.
	panicked func(key K, err error)

	// signal (buffered 1) wakes the dispatcher after a push.
	signal chan struct{}
	// stop is closed once, by halt.
	stop chan struct{}
	// synced is closed once the listener has synced, or is removed.
	synced chan struct{}
	// exited is closed when the dispatcher returns, if it was started.
	exited chan struct{}

	// started says that the dispatcher was started; guarded by the
	// informer's mu, under which it is started.
	started bool

	mu sync.Mutex
	// Everything below is guarded by mu.

	// pending holds one coalesced change per key the handler has not yet
	// been given; line holds the same keys, each once, in the order they
	// first became pending. So the buffer is bounded by the number of
	// keys, not of changes, and no key waits behind a later one.
	pending map[K]change[V]
	line    []K
	// bulk holds an initial list's adds, delivered before line: filling
	// an empty buffer needs no coalescing, and skipping the pending map
	// saves two map operations per key on the largest burst there is. A
	// later change to a key still in bulk goes to pending and is delivered
	// after it, so the handler sees the add first. bulk[:bulkAt] is
	// delivered.
	bulk   []keyed[K, V]
	bulkAt int
	// filling is set while a fill appends to bulk chunk by chunk: a
	// dispatcher that catches up with a chunk keeps bulk's room for the
	// next ones rather than dropping it, which made every chunk regrow
	// its slice from nothing.
	filling bool
	// peak is the most keys pending since the buffer was last emptied and
	// dropped. Maps never shrink, so after a burst (an initial list the
	// handler could not keep up with) an emptied buffer is replaced, or it
	// would hold memory for every key for good.
	peak int
	// pushed counts keys ever appended to line; taken counts keys
	// removed from it whose delivery has finished (or that delivered
	// nothing). Because line is FIFO, taken >= n means that every key
	// pushed before the nth push has been delivered.
	pushed, taken uint64
	// syncAt is pushed as it was when the listener's initial state had
	// been pushed; valid when marked. The listener has synced once
	// marked && taken >= syncAt.
	syncAt   uint64
	marked   bool
	isSynced bool
	stopped  bool
	// replaying is set while the cache is being replayed to a handler
	// added late (see replay.go); the keys replayed so far are in
	// replayedKeys while the cache has not changed since the replay
	// began, and in the set replayed (nil until then) once it has.
	// Meanwhile line holds the changes made since the replay began, and
	// waits for it.
	replaying    bool
	replayedKeys []K
	replayed     map[K]struct{}
	// delivered are Registration.AfterRevision callbacks waiting for the
	// handler to be given the changes pushed before their revision was
	// reached (see delivered.go).
	delivered []*deliveryWaiter
}

func newListener[K comparable, V any](h Handler[K, V], panicked func(K, error)) *listener[K, V] {
	rh, _ := h.(RevisionHandler)
	return &listener[K, V]{
		h:        h,
		rh:       rh,
		panicked: panicked,
		signal:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		synced:   make(chan struct{}),
		exited:   make(chan struct{}),
		pending:  make(map[K]change[V]),
	}
}

// keyed is a change to a key, as kept in bulk.
type keyed[K comparable, V any] struct {
	key K
	c   change[V]
}

// startBulkLocked reports whether the buffer is empty, so that a fill may
// use pushBulkLocked, and makes room for n changes.
func (l *listener[K, V]) startBulkLocked(n int) bool {
	if l.stopped || l.replaying || len(l.line) > 0 || l.bulkAt < len(l.bulk) {
		return false
	}
	l.bulk, l.bulkAt, l.filling = make([]keyed[K, V], 0, n), 0, true
	return true
}

// endBulkLocked ends a fill that startBulkLocked began: bulk's room is
// dropped once the dispatcher has taken what it holds.
func (l *listener[K, V]) endBulkLocked() {
	l.filling = false
	if l.bulkAt == len(l.bulk) {
		l.bulk, l.bulkAt = nil, 0
	}
}

// pushBulkLocked appends to bulk; see startBulkLocked.
func (l *listener[K, V]) pushBulkLocked(key K, c change[V]) {
	if l.stopped {
		return
	}
	l.bulk = append(l.bulk, keyed[K, V]{key, c})
	l.pushed++
}

// push records a change to key, coalescing it with a pending one.
func (l *listener[K, V]) push(key K, c change[V]) {
	l.mu.Lock()
	l.pushLocked(key, c)
	l.mu.Unlock()
	l.wake()
}

// pushLocked is push for a caller that holds l.mu and calls wake after
// unlocking.
func (l *listener[K, V]) pushLocked(key K, c change[V]) {
	if l.stopped {
		return
	}
	if p, ok := l.pending[key]; ok {
		l.pending[key] = merge(p, c)
		return
	}
	if l.replaying {
		if _, ok := l.replayedSetLocked()[key]; !ok {
			// The handler has not been given the key, and will not be
			// by the replay (see replayLocked): tell it as new.
			if c = unseen(c); c.kind == kindNone {
				return
			}
		}
	}
	l.pending[key] = c
	l.line = append(l.line, key)
	l.peak = max(l.peak, len(l.line))
	l.pushed++
}

// wake tells the dispatcher that there may be changes to deliver.
func (l *listener[K, V]) wake() {
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// resync pushes an update with old == new, v being the value cached at
// rev, unless key is already pending: then the handler will be given the
// latest value anyway.
func (l *listener[K, V]) resync(key K, v V, rev Revision) {
	l.mu.Lock()
	_, ok := l.pending[key]
	l.mu.Unlock()
	if !ok {
		// The informer holds its lock (for reading: a replay may hold it
		// too, but it makes nothing pending), so nothing can make key
		// pending between the check and the push.
		l.push(key, change[V]{kind: kindUpdate, old: v, cur: v, resync: true, rev: rev})
	}
}

// markSync records that the listener's initial state has been pushed.
func (l *listener[K, V]) markSync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncAt, l.marked = l.pushed, true
	l.checkSyncLocked()
}

func (l *listener[K, V]) checkSyncLocked() {
	if !l.isSynced && l.marked && l.taken >= l.syncAt {
		l.isSynced = true
		close(l.synced)
	}
}

func (l *listener[K, V]) hasSynced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.isSynced
}

// halt stops the dispatcher and drops what is pending. If removed, the
// listener also counts as synced, so that nobody waits for it.
func (l *listener[K, V]) halt(removed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		l.pending, l.line, l.bulk = nil, nil, nil
		l.delivered = nil // never called: stop reports true
		close(l.stop)
	}
	if removed && !l.isSynced {
		l.isSynced = true
		close(l.synced)
	}
}

// run is the dispatcher: it delivers pending changes until halted.
func (l *listener[K, V]) run() {
	defer close(l.exited)
	l.mu.Lock()
	for {
		key, c, ok := l.nextLocked()
		l.mu.Unlock()
		if !ok {
			return
		}
		if err := l.call(key, c); err != nil {
			// The change counts as delivered: the handler is not given
			// it again, only the key's next change, or a resync.
			l.panicked(key, err)
		}
		// One hold of the lock counts this change delivered and takes
		// the next, unless callbacks are due: they run without it.
		l.mu.Lock()
		l.taken++
		l.checkSyncLocked()
		if due := l.dueLocked(); len(due) > 0 {
			l.mu.Unlock()
			l.callDue(due)
			l.mu.Lock()
		}
	}
}

// call delivers one change, and returns a panic of the handler as an
// error.
func (l *listener[K, V]) call(key K, c change[V]) error {
	switch c.kind {
	case kindAdd:
		return protect("OnAdd", func() { l.tellRev(c.rev); l.h.OnAdd(key, c.cur, c.initialList) })
	case kindUpdate:
		return protect("OnUpdate", func() { l.tellRev(c.rev); l.h.OnUpdate(key, c.old, c.cur, c.resync) })
	case kindDelete:
		return protect("OnDelete", func() { l.tellRev(c.rev); l.h.OnDelete(key, c.cur) })
	}
	return nil
}

// tellRev tells a RevisionHandler the revision of the change it is about
// to be given. It runs inside the method's protect, so that a panic in it
// is one of that method.
func (l *listener[K, V]) tellRev(rev Revision) {
	if l.rh != nil {
		l.rh.ChangeRevision(rev)
	}
}

// next waits for the oldest pending key and takes it, or reports false
// once the listener is halted.
func (l *listener[K, V]) next() (K, change[V], bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextLocked()
}

// nextLocked is next for a caller that holds l.mu; it returns with l.mu
// held, having released it while it waited.
func (l *listener[K, V]) nextLocked() (K, change[V], bool) {
	for {
		if l.stopped {
			var zero K
			return zero, change[V]{}, false
		}
		if l.bulkAt < len(l.bulk) {
			kc := l.bulk[l.bulkAt]
			l.bulk[l.bulkAt] = keyed[K, V]{} // let the key and values be collected
			if l.bulkAt++; l.bulkAt == len(l.bulk) {
				if l.replaying || l.filling {
					// The replay or fill goes on appending: reuse
					// the room it was given.
					l.bulk, l.bulkAt = l.bulk[:0], 0
				} else {
					l.bulk, l.bulkAt = nil, 0
				}
			}
			return kc.key, kc.c, true
		}
		for len(l.line) > 0 && !l.replaying {
			key := l.line[0]
			var zero K
			l.line[0] = zero // let the key be collected
			l.line = l.line[1:]
			c := l.pending[key]
			delete(l.pending, key)
			if len(l.line) == 0 && l.peak > dropBufferAbove {
				l.pending, l.line, l.peak = make(map[K]change[V]), nil, 0
			}
			if c.kind == kindNone {
				l.taken++
				l.checkSyncLocked()
				continue
			}
			return key, c, true
		}
		if due := l.dueLocked(); len(due) > 0 {
			// Changes that delivered nothing (coalesced away) may have
			// been the last a callback waited for.
			l.mu.Unlock()
			l.callDue(due)
			l.mu.Lock()
			continue
		}
		l.mu.Unlock()
		select {
		case <-l.signal:
		case <-l.stop:
		}
		l.mu.Lock()
	}
}

// dropBufferAbove is the peak size above which an emptied buffer gives its
// memory back; below it, keeping the map saves reallocating it.
const dropBufferAbove = 1024

// idle reports whether every pushed change has been delivered (the
// replay, if any, included), or the listener is halted.
func (l *listener[K, V]) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped || !l.replaying && l.taken >= l.pushed
}

// pendingLen is the number of keys waiting for delivery.
func (l *listener[K, V]) pendingLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}
