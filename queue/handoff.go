package queue

import "sync"

// Hand-off: a Get that finds nothing ready parks on a waiter of its own, and
// whoever next makes a key ready takes that key for it, under the lock it
// already holds, exactly as the Get would have (takeNext), then wakes it.
// The woken Get returns without touching the lock again.
//
// With a condition variable instead, every woken Get had to re-take the
// mutex, behind the producers and the Dones that woke it: under contention
// that re-lock was where the queue's throughput and its tail latency were
// decided (docs/design/queue-lock.md).

// waiter is one parked Get.
type waiter[K comparable] struct {
	// key and shutdown are Get's results; written by the waker before it
	// sends on ready, read by the Get after it receives.
	key      K
	shutdown bool
	// dst receives the key's trigger reasons (GetWithReasons); nil if the
	// Get does not want them. Set by park, read by the waker under q.mu.
	dst *Reasons
	// ready is buffered(1): the waker never blocks on it.
	ready chan struct{}
	// next chains the waiters one unlock wakes; it is the waker's, not the
	// queue's, once handOff has returned the chain.
	next *waiter[K]
}

// waiterPool recycles waiters across Gets and queues of one key type, so that
// a Get that parks allocates nothing in the steady state.
type waiterPool[K comparable] struct{ sync.Pool }

func (p *waiterPool[K]) get() *waiter[K] {
	if w, ok := p.Get().(*waiter[K]); ok {
		return w
	}
	return &waiter[K]{ready: make(chan struct{}, 1)}
}

func (p *waiterPool[K]) put(w *waiter[K]) {
	var zero K
	w.key, w.shutdown, w.next, w.dst = zero, false, nil, nil
	p.Put(w)
}

// park registers the calling Get as waiting for a key, to be handed its
// reasons in dst (nil: none wanted). Called with q.mu held, only when no key
// is ready (the invariant on Queue.parked).
func (q *Queue[K]) park(dst *Reasons) *waiter[K] {
	w := q.waiters.get()
	w.dst = dst
	q.parked = append(q.parked, w)
	return w
}

// handOff gives ready keys to parked Gets, most recently parked first (its
// stack is the likeliest to be warm), and returns the chain of waiters to
// wake once the lock is released. now is metricsNow, for the queue-duration
// metric. Called with q.mu held.
func (q *Queue[K]) handOff(now int64) *waiter[K] {
	var chain *waiter[K]
	for q.ready.n > 0 && len(q.parked) > 0 {
		last := len(q.parked) - 1
		w := q.parked[last]
		q.parked[last] = nil
		q.parked = q.parked[:last]
		w.key = q.takeNext(now, w.dst)
		w.next, chain = chain, w
	}
	return chain
}

// shutDownParked adds every parked Get to chain with shutdown true and
// returns the chain: called with q.mu held, when shutting down with no key
// ready.
func (q *Queue[K]) shutDownParked(chain *waiter[K]) *waiter[K] {
	for i, w := range q.parked {
		w.shutdown = true
		w.next, chain = chain, w
		q.parked[i] = nil
	}
	q.parked = q.parked[:0]
	return chain
}

// wake wakes the waiters of a chain that handOff or shutDownParked returned.
func wake[K comparable](chain *waiter[K]) {
	for w := chain; w != nil; {
		next := w.next // w belongs to its Get again once woken
		w.ready <- struct{}{}
		w = next
	}
}

// unlock releases q.mu after handing any ready keys to parked Gets, then
// wakes those Gets. Every critical section that may make a key ready ends
// with it; now is metricsNow (0 when metrics are off).
func (q *Queue[K]) unlock(now int64) {
	if len(q.parked) == 0 || q.ready.n == 0 {
		q.mu.Unlock()
		return
	}
	chain := q.handOff(now)
	q.mu.Unlock()
	wake(chain)
}
