package queue

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
	readied := 0
	for {
		readied += q.promoteIfDue()
		if q.ready.n > 0 {
			break
		}
		if q.shuttingDown {
			q.mu.Unlock()
			return key, true
		}
		q.cond.Wait()
		now = q.metricsNow()
	}
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
	key = e.key
	if q.slab.reasons != nil {
		q.takeReasons(idx, dst)
	}
	if q.metrics == nil {
		q.mu.Unlock()
		q.signal(readied - 1) // this Get took one of them
		return key, false
	}
	q.queueDuration.observe(now - q.slab.times[idx])
	e.links[readyLinks].prev = q.startInflight(now)
	q.mu.Unlock()
	q.signal(readied - 1)
	return key, false
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
	readied := q.promoteAt(now)
	idx, pos := q.index.find(q.slab.entries, key, tag)
	if idx == none {
		q.mu.Unlock()
		q.signal(readied)
		return
	}
	e := &q.slab.entries[idx]
	if e.state != stateProcessing && e.state != stateDirty {
		q.mu.Unlock()
		q.signal(readied)
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
		readied++
	case e.waitSeq != 0:
		e.state = stateWaiting
	default:
		q.index.deleteAt(pos)
		if q.slab.release(idx) {
			q.delays, q.stale = nil, 0 // only stale slots can be left
		}
	}
	if q.processing == 0 && q.drain {
		readied = 2 // ShutDownWithDrain waits on the same cond: wake everyone
	}
	q.mu.Unlock()
	q.signal(readied)
}

// Len returns the number of keys ready now; keys waiting for a delay or
// being processed are not counted (as in client-go).
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	readied := q.promoteIfDue()
	n := q.ready.n
	q.mu.Unlock()
	q.signal(readied)
	return n
}

// Idle reports whether no key is ready and none is being processed (handed
// out by Get and not yet given back with Done), read at one instant. Keys
// waiting for a delay do not count: a queue whose only keys are due later is
// idle until they are due.
func (q *Queue[K]) Idle() bool {
	q.mu.Lock()
	readied := q.promoteIfDue()
	idle := q.ready.n == 0 && q.processing == 0
	q.mu.Unlock()
	q.signal(readied)
	return idle
}
