package workqueue

// Ageing: a ready key that has waited for the bound is served next, whatever
// its priority, oldest first (controller-runtime's priority queue starves a
// low-priority key behind a steady stream of normal ones:
// https://github.com/kubernetes-sigs/controller-runtime/issues/3496).
//
// All ready keys are also linked, through entry.links[ageLinks], into
// one FIFO in the order they became ready, so the oldest ready key is its
// head, found in O(1) whatever its priority or group. Get serves the head
// instead of the priority order's choice once the head has waited for the
// bound.
//
// The wait needs a time stamp, and reading the clock costs more than the
// rest of an Add+Get+Done (about 60ns on the project's machines, where a
// round trip is about 150ns). So the clock is read only while keys of more
// than one priority are ready, which is the only time a key can be passed
// over. A key that becomes ready while every ready key has its priority is
// left unstamped (entry.unstamped); the unstamped keys all start to age at
// the same moment, the first time a key of another priority is ready too,
// which is when the clock is read anyway (ageState.since). Until then no
// key could pass them by priority: they are served in their own priority's
// order. While unstamped keys from that moment are still ready, a key that
// becomes ready alone with its priority is stamped with the clock, so that
// it does not inherit their older time.
//
// Stamps therefore never come before the moment a key became ready: a key
// is never served as aged before it has truly waited for the bound. And
// they rise along the FIFO (but for the few microseconds between a caller
// reading the clock and taking the lock), so the head is the oldest.

// ageState is the queue's ageing bookkeeping, guarded by the queue's lock.
type ageState struct {
	// bound is the ageing bound in nanoseconds; 0 means ageing is off and
	// nothing else here is used.
	bound int64
	// fifo holds the ready keys in the order they became ready.
	fifo list
	// unstamped counts the ready keys with entry.unstamped set.
	unstamped int
	// since is when the unstamped keys started to age, once sinceSet.
	since    int64
	sinceSet bool
}

// stampReady links idx, which has just become ready, into the FIFO of
// ready keys and stamps it. now is the time if the caller read the clock
// (or metrics are on), else 0. The caller holds q.mu.
func (q *Queue[K]) stampReady(idx int32, now int64) {
	a, es := &q.age, q.slab.entries
	e := &es[idx]
	pushBack(&a.fifo, es, idx, ageLinks)
	several := len(q.ready.active) > 1
	known := now != 0 || q.stamp
	if !several && !a.sinceSet {
		// Alone with its priority: nothing can pass it yet.
		e.unstamped = true
		a.unstamped++
		if q.stamp {
			q.slab.times[idx] = now
		}
		return
	}
	if !known {
		now = q.nanos()
	}
	q.slab.times[idx] = now
	if several {
		q.startAgeing(now)
	}
}

// startAgeing starts the unstamped keys' wait at now, if it has not
// started: keys of more than one priority are ready. now 0 means unknown.
func (q *Queue[K]) startAgeing(now int64) {
	a := &q.age
	if a.unstamped == 0 || a.sinceSet {
		return
	}
	if now == 0 {
		now = q.nanos()
	}
	a.since, a.sinceSet = now, true
}

// unlinkReady takes idx, which Get is handing out, out of the FIFO.
func (q *Queue[K]) unlinkReady(idx int32) {
	a, es := &q.age, q.slab.entries
	unlink(&a.fifo, es, idx, ageLinks)
	if e := &es[idx]; e.unstamped {
		e.unstamped = false
		a.unstamped--
		if a.unstamped == 0 {
			a.sinceSet = false
		}
	}
}

// aged returns the oldest ready key if Get must serve it ahead of the
// priority order, else none. Ageing must be on, and keys of more than one
// priority ready.
func (q *Queue[K]) aged() int32 {
	a := &q.age
	head := a.fifo.head
	if head == peek(&q.ready) {
		return none // served next anyway: no clock read
	}
	stamp := q.slab.times[head]
	if q.slab.entries[head].unstamped {
		if !a.sinceSet {
			return none
		}
		stamp = a.since
	}
	if q.nanos()-stamp < a.bound {
		return none
	}
	return head
}
