package queue

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// Compile-time proof that a Queue drops into any client-go or
// controller-runtime program.
var _ workqueue.TypedRateLimitingInterface[string] = (*Queue[string])(nil)

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
	// After delays the keys; zero or negative means ready now.
	After time.Duration
	// RateLimited delays each key by at least the rate limiter's When.
	RateLimited bool
	// Priority orders ready keys: higher first. Default PriorityNormal.
	// Values beyond the int32 range are clamped to it.
	Priority int
}

// Queue is a deduplicating, delaying, prioritised, rate-limited work queue.
// Create one with New; the zero value is not usable. All methods are safe for
// concurrent use. See the package documentation for the contracts.
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
	rateLimiter workqueue.TypedRateLimiter[K]
	groupOf     func(K) string // nil: no fairness groups
	metrics     *metrics       // nil: no metrics
	name        string
	wake        chan struct{} // buffered(1): re-arm the timer
	stop        chan struct{} // closed by the first ShutDown
	timerDone   chan struct{} // closed when the timer goroutine returns
	// closed mirrors shuttingDown for readers that do not hold mu.
	closed atomic.Bool

	_ cacheLinePad

	// cond's L is &mu. It is signalled when a key becomes ready, on
	// shutdown, and when in-flight work drains; Signal reads it after
	// unlocking.
	cond sync.Cond

	_ cacheLinePad

	mu yieldingMutex
	// Everything below is guarded by mu.

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
// a rate limiter or group function for another key type, metrics without a
// name, or a metrics registration the registerer refuses (such as a second
// live queue with the same name on one registry).
func New[K comparable](opts ...Option) *Queue[K] {
	var c config
	for _, o := range opts {
		o(&c)
	}
	q := &Queue[K]{
		seed:      maphash.MakeSeed(),
		index:     newIndex[K](),
		slab:      slab[K]{free: none},
		armed:     never,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		timerDone: make(chan struct{}),
		name:      c.name,
		clock:     c.clock,
	}
	q.cond.L = &q.mu
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	q.epoch = q.clock.Now()
	q.rateLimiter = optionFor[workqueue.TypedRateLimiter[K]]("WithRateLimiter", c.rateLimiter)
	if q.rateLimiter == nil {
		q.rateLimiter = backoff.DefaultController[K](q.clock)
	}
	q.groupOf = optionFor[func(K) string]("WithGroup", c.groupOf)
	q.ready = newReadySet(q.groupOf != nil)
	if c.registerer != nil {
		if q.name == "" {
			panic("queue: WithMetrics needs WithName: the name is the metrics' name label")
		}
		q.slab.times = make([]int64, 0)
		q.metrics = newMetrics(q.name, q.collect)
		if err := q.metrics.register(c.registerer); err != nil {
			panic("queue: WithMetrics: " + err.Error())
		}
	}
	return q
}

// tag hashes key for the index. It reads only fields set by New, so callers
// compute it before locking.
func (q *Queue[K]) tag(key K) uint32 { return uint32(maphash.Comparable(q.seed, key)) }

// nanos is the queue's clock as nanoseconds since New.
func (q *Queue[K]) nanos() int64 { return int64(q.clock.Since(q.epoch)) }

// metricsNow is nanos when metrics are on and 0 otherwise, so that a queue
// without metrics reads no clock on its hot path.
func (q *Queue[K]) metricsNow() int64 {
	if q.metrics == nil {
		return 0
	}
	return q.nanos()
}

// Add marks key as needing processing now, at PriorityNormal.
//
// A key that is already ready stays where it is. A key waiting for a delay
// becomes ready now. A key being processed is processed once more after its
// Done. After ShutDown, Add does nothing.
func (q *Queue[K]) Add(key K) {
	now, tag := q.metricsNow(), q.tag(key)
	q.mu.Lock()
	readied := q.promoteAt(now) + q.addLocked(key, tag, PriorityNormal, 0, now)
	q.mu.Unlock()
	q.signal(readied)
}

// AddAfter adds key once delay has passed, at PriorityNormal. If key is
// already waiting, the earlier of the two times wins; a delay of zero or less
// is Add.
func (q *Queue[K]) AddAfter(key K, delay time.Duration) {
	q.AddWithOptions(AddOptions{After: delay}, key)
}

// AddRateLimited adds key after the rate limiter's When(key), which also
// counts a failure for key, at PriorityNormal.
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
	readied := 0
	for _, key := range keys {
		delay := o.After
		if o.RateLimited && !q.closed.Load() {
			// Checked first so that an add that will be ignored does not
			// count a failure.
			delay = max(delay, q.rateLimiter.When(key))
		}
		due := int64(0)
		if delay > 0 {
			due = now + int64(delay)
		}
		tag := q.tag(key)
		q.mu.Lock()
		if o.RateLimited && !q.shuttingDown {
			q.retries++
		}
		readied += q.promoteAt(now) + q.addLocked(key, tag, prio, due, now)
		q.mu.Unlock()
	}
	q.signal(readied)
}

func clampPriority(p int) int32 {
	return int32(min(max(p, math.MinInt32), math.MaxInt32))
}

// addLocked merges one add into the key's state; due 0 means now. The
// caller computes tag (the index hash) and now (metricsNow) before locking,
// to keep hashing and the clock out of the critical section. It returns 1 if
// a key became ready, for the caller to signal after unlocking.
func (q *Queue[K]) addLocked(key K, tag uint32, prio int32, due, now int64) int {
	if q.shuttingDown {
		return 0
	}
	idx, pos := q.index.find(q.slab.entries, key, tag)
	if idx == none {
		idx = q.slab.alloc(key)
		q.index.insert(pos, tag, idx)
		if due == 0 {
			q.adds++
			q.makeReady(idx, prio, now)
			return 1
		}
		e := &q.slab.entries[idx]
		e.state, e.prio = stateWaiting, prio
		q.wait(idx, due)
		return 0
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
			return 1
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
	return 0
}

// makeReady links idx into the ready set at prio; now is metricsNow.
func (q *Queue[K]) makeReady(idx int32, prio int32, now int64) {
	var name string
	if q.groupOf != nil {
		name = q.groupOf(q.slab.entries[idx].key)
	}
	push(&q.ready, q.slab.entries, idx, prio, name)
	if q.slab.times != nil {
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
}

// signal wakes up to n waiting Gets. It is called after unlocking, so that a
// woken worker does not immediately block on the mutex.
func (q *Queue[K]) signal(n int) {
	if n == 1 {
		q.cond.Signal()
	} else if n > 1 {
		q.cond.Broadcast()
	}
}

// Get blocks until a key is ready, marks it as processing and returns it.
// Keys come highest priority first, round-robin across groups within a
// priority, FIFO within a group. After ShutDown, Get still returns the keys
// that are ready, then returns shutdown true (and the zero key) at once.
// Every key Get returns must be given back with Done.
func (q *Queue[K]) Get() (key K, shutdown bool) {
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
	idx := pop(&q.ready, q.slab.entries)
	e := &q.slab.entries[idx]
	e.state = stateProcessing
	q.processing++
	key = e.key
	if q.metrics == nil {
		q.mu.Unlock()
		q.signal(readied - 1) // this Get took one of them
		return key, false
	}
	q.metrics.queueDuration.observe(now - q.slab.times[idx])
	e.prev = q.startInflight(now)
	q.mu.Unlock()
	q.signal(readied - 1)
	return key, false
}

// Done marks key as no longer processing. If key was added while it was
// processing, it becomes ready again now; if it was added with a delay, it
// waits for that. Done of a key that is not processing does nothing.
func (q *Queue[K]) Done(key K) {
	now, tag := q.metricsNow(), q.tag(key)
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
		q.metrics.workDuration.observe(now - q.endInflight(e.prev))
		e.prev = none
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

// promoteAt is promoteIfDue for callers that have read the clock already
// (now is 0 when they have not). Every caller that knows the time moves due
// keys, so that they do not wait for the timer goroutine to be scheduled
// behind busy goroutines.
func (q *Queue[K]) promoteAt(now int64) int {
	if now == 0 || len(q.delays) == 0 || q.shuttingDown || q.delays[0].due > now {
		return 0
	}
	return q.promoteDue(now)
}

// promoteIfDue makes due keys ready, so that callers that are awake do not
// wait for the timer goroutine. Called with q.mu held; it reads the clock only
// when keys are waiting.
func (q *Queue[K]) promoteIfDue() (readied int) {
	if len(q.delays) == 0 || q.shuttingDown {
		return 0
	}
	if now := q.nanos(); q.delays[0].due <= now {
		return q.promoteDue(now)
	}
	return 0
}

// Forget tells the rate limiter that key is done retrying (it succeeded or
// failed for good): its failure count goes back to zero. It does not remove
// the key from the queue; call Done for that.
func (q *Queue[K]) Forget(key K) { q.rateLimiter.Forget(key) }

// NumRequeues returns how many times the rate limiter has delayed key since
// it was last forgotten.
func (q *Queue[K]) NumRequeues(key K) int { return q.rateLimiter.NumRequeues(key) }

// ShutDown makes the queue refuse new adds and makes Get return shutdown
// once no key is ready. Delayed keys that are not yet due are dropped, and the
// queue's metrics are unregistered so that a new queue may take its name. It
// does not wait for workers; it does wait for the timer goroutine to return.
// ShutDown interrupts a ShutDownWithDrain that is waiting. Calling it again
// does nothing more.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	q.drain = false
	first := q.shutDownLocked()
	q.mu.Unlock()
	q.afterShutDown(first)
}

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been given back with Done. Keys added while processing are
// still handed out, so workers must keep calling Get until it reports
// shutdown, or the drain never ends.
func (q *Queue[K]) ShutDownWithDrain() {
	q.mu.Lock()
	q.drain = true
	first := q.shutDownLocked()
	for q.processing > 0 && q.drain {
		q.cond.Wait()
	}
	q.mu.Unlock()
	q.afterShutDown(first)
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// shutDownLocked reports whether this call is the one that shut down.
func (q *Queue[K]) shutDownLocked() (first bool) {
	q.cond.Broadcast()
	if q.shuttingDown {
		return false
	}
	// Keys already due are ready, even if nothing has moved them yet.
	q.promoteIfDue()
	q.shuttingDown = true
	q.closed.Store(true)
	close(q.stop)
	return true
}

// afterShutDown does the shutdown work that must not hold q.mu: a scrape in
// progress holds the registry's lock and waits for q.mu.
func (q *Queue[K]) afterShutDown(first bool) {
	if first && q.metrics != nil {
		q.metrics.unregister()
	}
	q.mu.Lock()
	started := q.timerStarted
	q.mu.Unlock()
	if started {
		<-q.timerDone
	}
}

func seconds(nanos int64) float64 { return float64(nanos) / 1e9 }
