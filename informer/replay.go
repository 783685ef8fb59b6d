package informer

// Replaying the cache to a handler added late.
//
// The replay walks the cache's maps in chunks, under the informer's read
// lock, which it releases between chunks: readers (Get, List) are never
// held up for more than a chunk, and neither is the watch, whose changes
// go on being pushed to every listener, this one included, in between.
// (Ranging over a map that is changed between steps is what the Go spec
// allows of a map changed during iteration: an entry removed before it is
// reached is not produced; one added may or may not be; the mutex orders
// every step against every change.)
//
// What the handler must see is each key's replayed add, then its changes
// from there. A key is either replayed (its current value appended to
// bulk, which is delivered first) or, if a change to it came first, told
// through that change: pushLocked turns a change to a key the replay has
// not reached into what it is to a handler that has never had the key (an
// update becomes an add of the new value; a delete, nothing), and the
// replay skips keys that have a change pending. The replayed set tells
// the two apart, and keeps a key that was deleted and created again from
// being replayed twice. Changes wait in line until the replay is done, so
// every add in bulk is delivered before any change.
//
// The set is built only once the cache changes during the replay: until
// then no key can come up twice and no change asks about one, so the keys
// replayed are only appended to a slice, from which the set is made at the
// first change (a replay of 100k keys with no change saves 100k map
// inserts, most of its cost).

// replayChunk is how many keys the replay handles per hold of the
// informer's read lock: about 0.1 ms of work, so that readers and the
// watch wait at most that long.
const replayChunk = 1024

// replay gives l, which AddHandler registered with replaying set, every
// cached entry as an initial add. It runs on AddHandler's goroutine.
func (inf *Informer[K, V]) replay(l *listener[K, V], sizeHint int) {
	// Allocated without a lock. bulk is nil: fill skips a replaying
	// listener.
	keys, bulk := make([]K, 0, sizeHint), make([]keyed[K, V], 0, sizeHint)
	inf.mu.RLock()
	l.mu.Lock()
	l.replayedKeys, l.bulk = keys, bulk
	writes := inf.cache.writes
	n := 0
	for k, it := range inf.cache.all() {
		if l.stopped {
			break
		}
		if inf.cache.writes != writes {
			l.replayedSetLocked() // a key may come up again
		}
		l.replayLocked(k, it)
		if n++; n%replayChunk == 0 {
			l.mu.Unlock()
			l.wake() // deliver the chunk while the next one is built
			inf.mu.RUnlock()
			inf.mu.RLock()
			l.mu.Lock()
		}
	}
	l.endReplayLocked()
	l.mu.Unlock()
	inf.mu.RUnlock()
	l.wake()
}

// replayLocked replays one cached entry, unless it was replayed already or
// a change to it is pending (which tells the handler of it; see
// pushLocked).
func (l *listener[K, V]) replayLocked(key K, it item[V]) {
	if len(l.pending) > 0 {
		if _, ok := l.pending[key]; ok {
			return
		}
	}
	if l.replayed == nil {
		// The cache has not changed since the replay began: key is new.
		l.replayedKeys = append(l.replayedKeys, key)
	} else {
		n := len(l.replayed)
		if l.replayed[key] = struct{}{}; len(l.replayed) == n {
			return // replayed already: one map operation instead of two
		}
	}
	l.bulk = append(l.bulk, keyed[K, V]{key, change[V]{kind: kindAdd, cur: it.value, initialList: true, rev: it.rev}})
	l.pushed++
	l.syncAt++ // nothing else was pushed to bulk: it was empty, and fill skips a replaying listener
}

// endReplayLocked ends the replay: the listener has synced once bulk is
// delivered, and then the changes in line follow.
func (l *listener[K, V]) endReplayLocked() {
	l.replaying, l.replayed, l.replayedKeys = false, nil, nil
	if l.stopped {
		return
	}
	// Nothing in line was delivered while replaying, and bulk goes
	// first, so taken reaches syncAt exactly when the replay has been
	// delivered.
	l.marked = true
	l.checkSyncLocked()
}

// replayedSetLocked returns the set of the keys replayed so far, making it
// from replayedKeys the first time: the cache has changed, so a key may
// come up again, or a change asks whether its key was replayed.
func (l *listener[K, V]) replayedSetLocked() map[K]struct{} {
	if l.replayed == nil {
		l.replayed = make(map[K]struct{}, max(len(l.replayedKeys), replayChunk))
		for _, k := range l.replayedKeys {
			l.replayed[k] = struct{}{}
		}
		l.replayedKeys = nil
	}
	return l.replayed
}

// unseen returns what c is to a handler that does not have the key: an add
// stays an add; an update is an add of the new value; a delete is nothing.
func unseen[V any](c change[V]) change[V] {
	switch c.kind {
	case kindUpdate:
		return change[V]{kind: kindAdd, cur: c.cur, rev: c.rev}
	case kindDelete:
		return change[V]{kind: kindNone, rev: c.rev}
	}
	return c
}
