package workqueue

import (
	"hash/maphash"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// Priorities for AddOptions.Priority. Any int works; these name the lanes a
// controller needs.
const (
	// PriorityLow is for work nobody is waiting on, such as the keys of an
	// informer's initial list: fresh changes at PriorityNormal go first.
	// It equals controller-runtime's handler.LowPriority.
	PriorityLow = -100
	// PriorityNormal is the priority of Add, AddAfter and AddRateLimited.
	PriorityNormal = 0
	// PriorityHigh is for work that should jump the normal lane.
	PriorityHigh = 100
)

// AddOptions says how AddWithOptions adds its keys.
type AddOptions struct {
	// After delays the keys; zero or negative means ready now. A delay that
	// reaches beyond the clock's range (rate.InfDuration, math.MaxInt64)
	// parks the keys: see AddAfter.
	After time.Duration
	// RateLimited delays each key by at least the rate limiter's When.
	RateLimited bool
	// Priority orders ready keys: higher first. Default PriorityNormal.
	// Values beyond the int32 range are clamped to it.
	Priority int
	// Reason says why the keys are added, for a queue WithReasons (its
	// What and Rev; the queue sets First and Count). Default: none.
	Reason Reason
}

// Queue is a deduplicating, delaying, prioritised, rate-limited work queue.
// Create one with New or Init; the zero value is not usable. All methods are
// safe for concurrent use. See package queue's documentation for the
// contracts.
type Queue[K comparable] struct {
	// The fields are in three groups, each on cache lines of its own:
	// what is read without the lock, the condition variable, and what the
	// lock guards. Add and Done hash the key and read the clock before
	// locking; when those reads shared a line with fields the lock holder
	// writes on another core, throughput halved or not depending on where
	// the allocator placed the queue.

	// Set by New and only read afterwards, or (closed) written once.
	seed        maphash.Seed // for index tags
	clock       clock.WithTicker
	epoch       time.Time // nanos are measured from here
	rateLimiter backoff.Limiter[K]
	groupOf     func(K) string // nil: no fairness groups
	metrics     *Metrics       // nil: no metrics
	// stamp says that adds read the clock to stamp when a key became
	// ready (metricsNow): metrics are on, or WithReadyTimes.
	stamp bool
	// checkKeys says how to refuse keys the queue cannot use (key.go).
	checkKeys keyCheck
	wake      chan struct{} // buffered(1): re-arm the timer
	stop      chan struct{} // closed by the first ShutDown
	timerDone chan struct{} // closed when the timer goroutine returns
	// closed mirrors shuttingDown for readers that do not hold mu.
	closed atomic.Bool
	// waiters recycles the waiters of parked Gets.
	waiters waiterPool[K]

	_ cacheLinePad

	// drained's L is &mu. ShutDownWithDrain waits on it; it is broadcast
	// when in-flight work drains and on ShutDown.
	drained sync.Cond

	_ cacheLinePad

	// mu never hands itself to a parked goroutine (lock.go): sync.Mutex's
	// starvation mode turned every lock operation into a goroutine switch
	// in some runs. It once yielded the processor up to 1000 times before
	// parking, which made the tail bimodal; since Gets are handed their
	// key (handoff.go) nobody re-takes it after a wake-up, and it neither
	// yields nor hands over (docs/design/queue-lock.md).
	mu bargingMutex
	// Everything below is guarded by mu.

	// parked are the Gets waiting for a key (handoff.go). It is empty
	// whenever a key is ready, except inside a critical section: every
	// one that makes a key ready ends with unlock, which hands it over.
	parked []*waiter[K]
	// handed are waiters that were handed a key and whose Gets may not
	// have collected it yet (state waiterHanded); collected ones linger
	// until the next hand-off or steal prunes them (handoff.go).
	handed []*waiter[K]

	// index holds every key the queue knows: ready, waiting, processing or
	// dirty. A key absent from it has no state anywhere.
	index index[K]
	// slab owns the entries that index points at.
	slab slab[K]
	// ready holds the keys in stateReady; ready.n is Len.
	ready readySet
	// delays is a min-heap by due time of the keys waiting for a delay, in
	// stateWaiting or stateProcessing, plus stale slots (see delay.go).
	delays []delayed
	// stale counts the slots in delays that are no longer live.
	stale int
	// delaySeq numbers due times as they are set, for delayed.seq.
	delaySeq uint32
	// processing counts keys in stateProcessing or stateDirty.
	processing int
	// inflight holds the start times of the keys being processed, when
	// metrics are on; a processing entry's prev field is its slot, and
	// free slots hold freeSlot. It is as long as the most keys ever in
	// flight at once (about the number of workers), and a slot array
	// rather than a list through the entries so that Get and Done touch no
	// other key's entry.
	inflight []int64
	// inflightFree lists the free slots of inflight.
	inflightFree []int32
	// queueDuration and workDuration feed the histograms of the same
	// names, when metrics are on.
	queueDuration, workDuration histogram

	// age is the ageing bookkeeping (ageing.go).
	age ageState

	shuttingDown bool
	// drain is true while ShutDownWithDrain waits for processing to reach 0.
	drain bool

	// armed is the due time the timer goroutine sleeps until, or never.
	armed        int64
	timerStarted bool

	// adds and retries feed workqueue_adds_total and workqueue_retries_total.
	adds, retries uint64

	_ cacheLinePad // keeps the next allocation off the guarded fields' last line
}

// cacheLinePad is two cache lines: x86 prefetches lines in pairs.
type cacheLinePad [128]byte

// New returns an empty queue configured by opts.
//
// New panics on options that cannot work, with a message naming the option:
// a rate limiter or group function built for another key type. Nil options
// are ignored. Only this module calls it, with options it built for K;
// package queue's New returns the error instead (see Init).
func New[K comparable](opts ...Option) *Queue[K] {
	q := new(Queue[K])
	if err := Init(q, opts...); err != nil {
		panic(err.Error())
	}
	return q
}

// Init is New in place: it makes *q, which must be a zero Queue that no
// goroutine uses yet, an empty queue configured by opts. It is for a type
// that holds a Queue by value, as package queue's does, so that no pointer
// and no separate allocation stand between that type and the queue's
// cache-line layout. Where New panics, it returns the error instead and
// leaves *q as it was.
func Init[K comparable](q *Queue[K], opts ...Option) error {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	rateLimiter, err := optionFor[backoff.Limiter[K]]("WithRateLimiter", c.rateLimiter)
	if err != nil {
		return err
	}
	groupOf, err := optionFor[func(K) string]("WithGroup", c.groupOf)
	if err != nil {
		return err
	}
	*q = Queue[K]{
		seed:      maphash.MakeSeed(),
		index:     newIndex[K](),
		slab:      slab[K]{free: none},
		armed:     never,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		timerDone: make(chan struct{}),
		clock:     c.clock,
		metrics:   c.metrics,
		checkKeys: keyCheckFor(reflect.TypeFor[K]()),
		age:       ageState{fifo: newList()},
	}
	q.mu.init()
	q.drained.L = &q.mu
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	q.epoch = q.clock.Now()
	q.rateLimiter = rateLimiter
	if q.rateLimiter == nil {
		q.rateLimiter = backoff.DefaultController[K](q.clock)
	}
	q.groupOf = groupOf
	q.ready = newReadySet(q.groupOf != nil)
	switch {
	case c.ageing <= 0:
		q.age.bound = int64(DefaultAgeing)
	case c.ageing != NoAgeing:
		q.age.bound = int64(c.ageing)
	}
	q.stamp = q.metrics != nil || c.readyTimes
	if q.stamp || q.age.bound != 0 {
		q.slab.times = make([]int64, 0)
	}
	if c.reasons {
		q.slab.reasons = make([]reasonSlot, 0)
	}
	if q.metrics != nil {
		q.metrics.attach(q.collect)
	}
	return nil
}

// tag hashes key for the index, first refusing keys the queue cannot hold
// (key.go). It reads only fields set by New, so callers compute it before
// locking.
func (q *Queue[K]) tag(key K) uint32 {
	if q.checkKeys != keyCheckNone {
		checkKey(q.checkKeys, key)
	}
	return uint32(maphash.Comparable(q.seed, key))
}

// nanos is the queue's clock as nanoseconds since New.
func (q *Queue[K]) nanos() int64 { return int64(q.clock.Since(q.epoch)) }

// metricsNow is nanos when metrics (or WithReadyTimes) are on and 0
// otherwise, so that a queue without them reads no clock on its hot path.
func (q *Queue[K]) metricsNow() int64 {
	if !q.stamp {
		return 0
	}
	return q.nanos()
}

// Add marks key as needing processing now, at PriorityNormal.
//
// A key that is already ready stays where it is. A key waiting for a delay
// becomes ready now. A key being processed is processed once more after its
// Done. After ShutDown, Add does nothing.
//
// Add, AddAfter, AddRateLimited and AddWithOptions panic on a key that is
// not equal to itself (a NaN, or a value holding one) or that cannot be
// hashed (an interface holding a slice, map or func): the queue could never
// find such a key again, so Done and ShutDownWithDrain would not work.
func (q *Queue[K]) Add(key K) {
	now, tag := q.metricsNow(), q.tag(key)
	q.mu.Lock()
	q.promoteAt(now)
	q.addLocked(key, tag, PriorityNormal, 0, now)
	q.unlock(now)
}

// AddAfter adds key once delay has passed, at PriorityNormal. If key is
// already waiting, the earlier of the two times wins; a delay of zero or less
// is Add.
//
// A delay that reaches beyond the clock's range, such as rate.InfDuration
// or math.MaxInt64, means never: the key is parked. It waits, with no timer
// set for it, until a plain Add makes it ready or a shorter delay replaces
// its own (as time.Time.Add saturates in client-go's queue; it does not
// wrap around to "now").
func (q *Queue[K]) AddAfter(key K, delay time.Duration) {
	q.AddWithOptions(AddOptions{After: delay}, key)
}

// AddRateLimited adds key after the rate limiter's When(key), which also
// counts a failure for key, at PriorityNormal. A limiter that says
// rate.InfDuration parks the key (see AddAfter).
func (q *Queue[K]) AddRateLimited(key K) {
	q.AddWithOptions(AddOptions{RateLimited: true}, key)
}

// AddWithOptions adds keys as o says. Merging with a key the queue already
// holds keeps the earlier time and the higher priority; a ready key raised to
// a higher priority goes to the back of that priority's line.
func (q *Queue[K]) AddWithOptions(o AddOptions, keys ...K) {
	prio := clampPriority(o.Priority)
	now := q.metricsNow()
	if o.After > 0 || o.RateLimited {
		now = q.nanos()
	}
	for _, key := range keys {
		tag := q.tag(key) // before When: a refused key counts no failure
		delay := o.After
		if o.RateLimited && !q.closed.Load() {
			// Checked first so that an add that will be ignored does not
			// count a failure.
			delay = max(delay, q.rateLimiter.When(key))
		}
		due := dueAt(now, delay)
		q.mu.Lock()
		if due != 0 && !q.shuttingDown {
			q.retries++ // as controller-runtime counts: any add with a delay
		}
		q.promoteAt(now)
		idx := q.addLocked(key, tag, prio, due, now)
		q.noteReasonAt(idx, o.Reason.What, o.Reason.Rev, now) // before unlock, which may hand the key to a parked Get
		q.unlock(now)
	}
}

// dueAt is the due time of a delay from now: 0 (ready now) for no delay,
// never (parked) for one that reaches beyond the clock's range, and never
// 0 otherwise.
func dueAt(now int64, delay time.Duration) int64 {
	if delay <= 0 {
		return 0
	}
	// now is nanoseconds since New, so it is negative only on a clock set
	// back: then now+delay cannot overflow.
	if int64(delay) >= never-max(now, 0) {
		return never
	}
	return max(now+int64(delay), 1)
}

func clampPriority(p int) int32 {
	return int32(min(max(p, math.MinInt32), math.MaxInt32))
}

// addLocked merges one add into the key's state; due 0 means now, never
// means parked. The caller computes tag (the index hash) and now
// (metricsNow) before locking, to keep hashing and the clock out of the
// critical section, and releases q.mu with unlock, which hands a key that
// became ready to a parked Get. It returns the key's slab index, or none if
// the queue is shut down and ignored the add.
func (q *Queue[K]) addLocked(key K, tag uint32, prio int32, due, now int64) int32 {
	if q.shuttingDown {
		return none
	}
	idx, pos := q.index.find(q.slab.entries, key, tag)
	if idx == none {
		idx = q.slab.alloc(key)
		q.index.insert(pos, tag, idx)
		if due == 0 {
			q.adds++
			q.makeReady(idx, prio, now)
			return idx
		}
		e := &q.slab.entries[idx]
		e.state, e.prio = stateWaiting, prio
		q.wait(idx, due)
		return idx
	}
	e := &q.slab.entries[idx]
	switch e.state {
	case stateReady:
		if prio > e.prio {
			q.raise(idx, prio)
		}
	case stateWaiting:
		prio = max(prio, e.prio)
		if due == 0 {
			q.unwait(idx)
			q.adds++
			q.makeReady(idx, prio, now)
			return idx
		}
		e.prio = prio
		q.waitEarlier(idx, due)
	case stateProcessing:
		if e.waitSeq != 0 {
			// A delayed re-add is pending: merge with it.
			prio = max(prio, e.prio)
			if due == 0 {
				q.unwait(idx)
			}
		}
		e.prio = prio
		switch {
		case due == 0:
			e.state = stateDirty
			q.adds++
		case e.waitSeq == 0:
			q.wait(idx, due)
		default:
			q.waitEarlier(idx, due)
		}
	case stateDirty:
		e.prio = max(prio, e.prio)
	}
	return idx
}

// makeReady links idx into the ready set at prio; now is metricsNow.
func (q *Queue[K]) makeReady(idx int32, prio int32, now int64) {
	var name string
	if q.groupOf != nil {
		name = q.groupOf(q.slab.entries[idx].key)
	}
	push(&q.ready, q.slab.entries, idx, prio, name)
	if q.age.bound != 0 {
		q.stampReady(idx, now) // and the metrics' time
	} else if q.slab.times != nil {
		q.slab.times[idx] = now
	}
}

// raise moves a ready key to the back of the higher priority prio.
func (q *Queue[K]) raise(idx int32, prio int32) {
	var name string
	if q.groupOf != nil {
		name = q.groupOf(q.slab.entries[idx].key)
	}
	remove(&q.ready, q.slab.entries, idx, name)
	push(&q.ready, q.slab.entries, idx, prio, name)
	if q.age.bound != 0 && len(q.ready.active) > 1 {
		q.startAgeing(0) // it keeps its place in the FIFO and its stamp
	}
}

// take unlinks the ready key idx for Get.
func (q *Queue[K]) take(idx int32) {
	var name string
	if q.groupOf != nil {
		name = q.groupOf(q.slab.entries[idx].key)
	}
	remove(&q.ready, q.slab.entries, idx, name)
}

// Forget tells the rate limiter that key is done retrying (it succeeded or
// failed for good): its failure count goes back to zero. It does not remove
// the key from the queue; call Done for that.
func (q *Queue[K]) Forget(key K) { q.rateLimiter.Forget(key) }

// NumRequeues returns how many times the rate limiter has delayed key since
// it was last forgotten.
func (q *Queue[K]) NumRequeues(key K) int { return q.rateLimiter.NumRequeues(key) }

func seconds(nanos int64) float64 { return float64(nanos) / 1e9 }
