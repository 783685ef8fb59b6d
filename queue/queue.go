package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/converge-go/converge/internal/workqueue"
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
}

// Queue is a deduplicating, delaying, prioritised, rate-limited work queue.
// Create one with New; the zero value is not usable. All methods are safe for
// concurrent use. See the package documentation for the contracts.
type Queue[K comparable] struct {
	// The engine, held by value: a pointer would put one more load, and
	// one more allocation that may share a cache line with anything, in
	// front of the engine's own layout (its fields are grouped on cache
	// lines of their own).
	e workqueue.Queue[K]
}

// New returns an empty queue configured by opts.
//
// New returns an error naming the option, and a nil Queue, for options that
// cannot work: a nil Option, a nil value given to an option (see each
// option), a rate limiter or group function built for another key type.
// Options left out keep their documented defaults. New starts no goroutine;
// on an error it has not attached the queue to any Metrics.
func New[K comparable](opts ...Option) (*Queue[K], error) {
	var c config
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("queue.New: option %d is nil", i)
		}
		o(&c)
	}
	if err := errors.Join(c.bad...); err != nil {
		return nil, fmt.Errorf("queue.New: %w", err)
	}
	q := new(Queue[K])
	if err := workqueue.Init(&q.e, c.opts...); err != nil {
		return nil, err
	}
	return q, nil
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
func (q *Queue[K]) Add(key K) { q.e.Add(key) }

// AddAfter adds key once delay has passed, at PriorityNormal. If key is
// already waiting, the earlier of the two times wins; a delay of zero or less
// is Add.
//
// A delay that reaches beyond the clock's range, such as rate.InfDuration
// or math.MaxInt64, means never: the key is parked. It waits, with no timer
// set for it, until a plain Add makes it ready or a shorter delay replaces
// its own (as time.Time.Add saturates in client-go's queue; it does not
// wrap around to "now").
func (q *Queue[K]) AddAfter(key K, delay time.Duration) { q.e.AddAfter(key, delay) }

// AddRateLimited adds key after the rate limiter's When(key), which also
// counts a failure for key, at PriorityNormal. A limiter that says
// rate.InfDuration parks the key (see AddAfter).
func (q *Queue[K]) AddRateLimited(key K) { q.e.AddRateLimited(key) }

// AddWithOptions adds keys as o says. Merging with a key the queue already
// holds keeps the earlier time and the higher priority; a ready key raised to
// a higher priority goes to the back of that priority's line.
func (q *Queue[K]) AddWithOptions(o AddOptions, keys ...K) {
	q.e.AddWithOptions(workqueue.AddOptions{After: o.After, RateLimited: o.RateLimited, Priority: o.Priority}, keys...)
}

// Get blocks until a key is ready, marks it as processing and returns it.
// Keys come highest priority first, round-robin across groups within a
// priority, FIFO within a group; but a key that has waited for the ageing
// bound comes first whatever its priority (see WithAgeing). After ShutDown,
// Get still returns the keys that are ready, then returns shutdown true (and
// the zero key) at once. Every key Get returns must be given back with Done.
func (q *Queue[K]) Get() (key K, shutdown bool) { return q.e.Get() }

// Done marks key as no longer processing. If key was added while it was
// processing, it becomes ready again now; if it was added with a delay, it
// waits for that. Done of a key that is not processing does nothing.
func (q *Queue[K]) Done(key K) { q.e.Done(key) }

// Forget tells the rate limiter that key is done retrying (it succeeded or
// failed for good): its failure count goes back to zero. It does not remove
// the key from the queue; call Done for that.
func (q *Queue[K]) Forget(key K) { q.e.Forget(key) }

// NumRequeues returns how many times the rate limiter has delayed key since
// it was last forgotten.
func (q *Queue[K]) NumRequeues(key K) int { return q.e.NumRequeues(key) }

// Len returns the number of keys ready now; keys waiting for a delay or
// being processed are not counted (as in client-go).
func (q *Queue[K]) Len() int { return q.e.Len() }

// Idle reports whether no key is ready and none is being processed (handed
// out by Get and not yet given back with Done), read at one instant. Keys
// waiting for a delay do not count: a queue whose only keys are due later is
// idle until they are due.
func (q *Queue[K]) Idle() bool { return q.e.Idle() }

// ShutDown makes the queue refuse new adds and makes Get return shutdown
// once no key is ready. Delayed keys that are not yet due are dropped. The
// queue's Metrics stay registered: a new queue reporting into them takes
// over (see NewMetrics). It does not wait for workers; it does wait for the
// queue's timer goroutine to return. ShutDown interrupts a
// ShutDownWithDrain that is waiting. Calling it again does nothing more.
func (q *Queue[K]) ShutDown() { q.e.ShutDown() }

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been given back with Done. Keys added while processing are
// still handed out, so workers must keep calling Get until it reports
// shutdown, or the drain never ends.
func (q *Queue[K]) ShutDownWithDrain() { q.e.ShutDownWithDrain() }

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been called.
func (q *Queue[K]) ShuttingDown() bool { return q.e.ShuttingDown() }
