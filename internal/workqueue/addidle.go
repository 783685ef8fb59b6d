package workqueue

// AddUnlessProcessing is Add, except that it does nothing, and reports
// false, if a worker holds key (Get returned it and Done has not been
// called). It is for a wake-up whose purpose a worker that already holds
// the key fulfils by itself: reconcile's read-your-writes gate queues a
// parked key when its informer catches up, and a worker that took the key
// meanwhile checks the gate anyway, so an Add would only run it once more.
// Deciding under the queue's lock is what makes it exact: a separate check
// of the worker's state would race with Get.
func (q *Queue[K]) AddUnlessProcessing(key K) bool {
	now, tag := q.metricsNow(), q.tag(key)
	q.mu.Lock()
	if idx, _ := q.index.find(q.slab.entries, key, tag); idx != none {
		if s := q.slab.entries[idx].state; s == stateProcessing || s == stateDirty {
			q.mu.Unlock()
			return false
		}
	}
	q.promoteAt(now)
	q.addLocked(key, tag, PriorityNormal, 0, now)
	q.unlock(now)
	return true
}
