package workqueue

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Hand-off: a Get that finds nothing ready parks on a waiter of its own, and
// whoever next makes a key ready takes that key for it, under the lock it
// already holds, exactly as the Get would have (takeNext), then wakes it.
// The woken Get returns without touching the lock again.
//
// With a condition variable instead, every woken Get had to re-take the
// mutex, behind the producers and the Dones that woke it: under contention
// that re-lock was where the queue's throughput and its tail latency were
// decided (docs/design/queue-lock.md).
//
// A handed key is bound to a goroutine that is not running yet. If that
// goroutine then waits long for a processor (it sits in the run queue of a
// processor whose thread the OS has descheduled, while the other processor
// stays busy and never steals it), its key waits with it, for milliseconds,
// though other workers are free. So a Get that finds nothing ready takes a
// key that was handed over but not yet collected (steal), and the woken Get
// it was meant for, finding it gone, looks again. With a condition variable
// the same stall delayed a wake-up but never a key; now it delays neither.

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
	// state is parked, handed, collected or stolen; see the constants.
	// Only the waker sets handed (under q.mu), and a handed waiter leaves
	// that state once, by the CAS of its own Get (collected) or of a
	// stealing Get (stolen, under q.mu).
	state atomic.Uint32
	// next chains the waiters one unlock wakes; it is the waker's, not the
	// queue's, once handOff has returned the chain.
	next *waiter[K]
}

// Waiter states.
const (
	// waiterParked: in q.parked, or being set up or torn down by its Get.
	waiterParked = iota
	// waiterHanded: key holds a key taken for this waiter, not yet
	// returned by its Get; the waiter is in q.handed.
	waiterHanded
	// waiterCollected: its Get returned the key. It stays in q.handed
	// until a critical section prunes it back to the pool: its Get no
	// longer touches it.
	waiterCollected
	// waiterStolen: another Get returned the key. The waiter has left
	// q.handed and belongs to its Get again, which looks for another key.
	waiterStolen
)

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
	w.state.Store(waiterParked)
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
	q.pruneHanded()
	for q.ready.n > 0 && len(q.parked) > 0 {
		last := len(q.parked) - 1
		w := q.parked[last]
		q.parked[last] = nil
		q.parked = q.parked[:last]
		w.key = q.takeNext(now, w.dst)
		w.state.Store(waiterHanded)
		q.handed = append(q.handed, w)
		w.next, chain = chain, w
	}
	return chain
}

// pruneHanded returns the waiters whose Gets have collected their keys to
// the pool. Called with q.mu held.
func (q *Queue[K]) pruneHanded() {
	kept := q.handed[:0]
	for _, w := range q.handed {
		if w.state.Load() == waiterCollected {
			q.waiters.put(w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(q.handed[len(kept):])
	q.handed = kept
}

// steal takes a key handed to a Get that has not collected it yet, for a
// Get that found nothing ready and would otherwise park; dst is that Get's
// (GetWithReasons). It only takes from a waiter that wanted reasons exactly
// if this Get does, so the reasons travel with the key. Called with q.mu
// held.
func (q *Queue[K]) steal(dst *Reasons) (key K, ok bool) {
	q.pruneHanded()
	for i, w := range q.handed {
		if (w.dst == nil) != (dst == nil) || !w.state.CompareAndSwap(waiterHanded, waiterStolen) {
			continue
		}
		key = w.key
		if dst != nil {
			*dst = *w.dst
		}
		// Its Get owns w again from here: it leaves q.handed for good.
		q.handed = slices.Delete(q.handed, i, i+1)
		return key, true
	}
	return key, false
}

// collect is a woken Get's side of the hand-off: it returns the key w was
// handed, and ok false if another Get stole it (w is then the caller's
// again). After a successful collect the caller must not touch w: a
// critical section may recycle it at any time.
func (w *waiter[K]) collect() (key K, shutdown, ok bool) {
	key, shutdown = w.key, w.shutdown // read before the CAS that gives w up
	if shutdown {
		return key, true, true
	}
	return key, false, w.state.CompareAndSwap(waiterHanded, waiterCollected)
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
