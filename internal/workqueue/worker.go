package workqueue

import "hash/maphash"

// The worker side of the queue: Get hands keys out, Done takes them back.

// Get blocks until a key is ready, marks it as processing and returns it.
// Keys come highest priority first, round-robin across groups within a
// priority, FIFO within a group; but a key that has waited for the ageing
// bound comes first whatever its priority (see WithAgeing). After ShutDown, Get still returns the keys
// that are ready, then returns shutdown true (and the zero key) at once.
// Every key Get returns must be given back with Done.
func (q *Queue[K]) Get() (key K, shutdown bool) { return q.get(nil) }

// get is Get, handing the key's reasons to dst if it is not nil
// (GetWithReasons).
func (q *Queue[K]) get(dst *Reasons) (key K, shutdown bool) {
	now := q.metricsNow()
	q.mu.Lock()
	return q.getLocked(now, dst)
}

// getLocked is get for a caller that holds q.mu and read now
// (metricsNow) before locking; it releases q.mu.
func (q *Queue[K]) getLocked(now int64, dst *Reasons) (key K, shutdown bool) {
	for {
		q.promoteIfDue()
		if q.ready.n > 0 {
			key = q.takeNext(now, dst)
			q.unlock(now) // promoteIfDue may have readied more than this one
			return key, false
		}
		if len(q.handed) > 0 {
			if key, ok := q.steal(dst); ok {
				q.mu.Unlock()
				return key, false
			}
		}
		if q.shuttingDown {
			q.mu.Unlock()
			return key, true
		}
		w := q.park(dst)
		q.mu.Unlock()
		<-w.ready
		key, shutdown, ok := w.collect()
		if ok {
			if shutdown {
				q.waiters.put(w)
			}
			return key, shutdown
		}
		// Stolen: w is ours again once the thief's critical section
		// ends, which taking the lock waits for. Look for another key.
		now = q.metricsNow()
		q.mu.Lock()
		q.waiters.put(w)
	}
}

// takeNext takes the key Get hands out next, marks it processing, moves its
// reasons to dst (if not nil) and returns it; now is metricsNow. Called with
// q.mu held and a key ready.
func (q *Queue[K]) takeNext(now int64, dst *Reasons) K {
	idx := none
	if q.age.bound != 0 && len(q.ready.active) > 1 {
		idx = q.aged()
	}
	if idx == none {
		idx = pop(&q.ready, q.slab.entries)
	} else {
		q.take(idx)
	}
	if q.age.bound != 0 {
		q.unlinkReady(idx)
	}
	e := &q.slab.entries[idx]
	e.state = stateProcessing
	q.processing++
	if q.slab.reasons != nil {
		q.takeReasons(idx, dst)
	}
	if q.metrics != nil {
		// now may predate the stamp by a hair when another goroutine made
		// the key ready while this one waited for the lock.
		q.queueDuration.observe(max(now-q.slab.times[idx], 0))
		e.links[readyLinks].prev = q.startInflight(now)
	}
	return e.key
}

// Done marks key as no longer processing. If key was added while it was
// processing, it becomes ready again now; if it was added with a delay, it
// waits for that. Done of a key that is not processing does nothing.
func (q *Queue[K]) Done(key K) {
	if q.checkKeys != keyCheckNone && !usable(q.checkKeys, key) {
		return // Add refused it: it cannot be processing
	}
	now, tag := q.metricsNow(), uint32(maphash.Comparable(q.seed, key))
	q.mu.Lock()
	q.doneLocked(key, tag, now)
	q.unlock(now)
}

// DoneAndGet is Done(done) then GetWithReasons(dst) (Get if dst is nil) in
// one hold of the lock: a worker that goes straight from one key to the
// next takes the lock once a key instead of twice. If done was added while
// it was processed and nothing outranks it, the worker gets it back.
func (q *Queue[K]) DoneAndGet(done K, dst *Reasons) (key K, shutdown bool) {
	if dst != nil {
		dst.n, dst.Dropped = 0, 0
	}
	now := q.metricsNow()
	if q.checkKeys != keyCheckNone && !usable(q.checkKeys, done) {
		q.mu.Lock()
		return q.getLocked(now, dst) // Add refused it: it cannot be processing
	}
	tag := uint32(maphash.Comparable(q.seed, done))
	q.mu.Lock()
	q.doneLocked(done, tag, now)
	return q.getLocked(now, dst)
}

// doneLocked is Done with q.mu held; the caller releases it with unlock, as
// the key may have become ready again.
func (q *Queue[K]) doneLocked(key K, tag uint32, now int64) {
	q.promoteAt(now)
	idx, pos := q.index.find(q.slab.entries, key, tag)
	if idx == none {
		return
	}
	e := &q.slab.entries[idx]
	if e.state != stateProcessing && e.state != stateDirty {
		return
	}
	q.processing--
	if q.metrics != nil {
		q.workDuration.observe(now - q.endInflight(e.links[readyLinks].prev))
		e.links[readyLinks].prev = none
	}
	switch {
	case e.state == stateDirty:
		q.makeReady(idx, e.prio, now)
	case e.waitSeq != 0:
		e.state = stateWaiting
	default:
		q.index.deleteAt(pos)
		if q.slab.release(idx) {
			q.delays, q.stale = nil, 0 // only stale slots can be left
		}
	}
	if q.processing == 0 && q.drain {
		q.drained.Broadcast()
	}
}

// Len returns the number of keys ready now; keys waiting for a delay or
// being processed are not counted (as in client-go).
func (q *Queue[K]) Len() int {
	now := q.metricsNow()
	q.mu.Lock()
	q.promoteIfDue()
	n := q.ready.n
	q.unlock(now)
	return n
}

// Idle reports whether no key is ready and none is being processed (handed
// out by Get and not yet given back with Done), read at one instant. Keys
// waiting for a delay do not count: a queue whose only keys are due later is
// idle until they are due.
func (q *Queue[K]) Idle() bool {
	now := q.metricsNow()
	q.mu.Lock()
	q.promoteIfDue()
	idle := q.ready.n == 0 && q.processing == 0
	q.unlock(now)
	return idle
}
