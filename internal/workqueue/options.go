package workqueue

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// Option configures a Queue in New. A nil Option is ignored, like a nil
// limiter or group function, so that this module's callers can choose
// options conditionally (package reconcile passes its metrics, nil or not).
// Package queue's options refuse nil values before they get here, as the
// module's constructors do for their users.
//
// Options are not generic: with Option[K], every option that carries no
// key-typed value (WithClock, WithMetrics, WithAgeing) would need its type
// argument spelled out at the call site (queue.WithClock[string](clk)),
// because Go does not infer a type argument from the parameter a call's
// result is passed to. The two options that do carry key-typed values,
// WithRateLimiter and WithGroup, infer K from their argument and are checked
// against the queue's key type when New runs.
type Option func(*config)

type config struct {
	rateLimiter any // backoff.Limiter[K]
	clock       clock.WithTicker
	metrics     *Metrics
	groupOf     any // func(K) string
	ageing      time.Duration
	readyTimes  bool
	reasons     bool
}

// WithRateLimiter sets the limiter that AddRateLimited, Forget and
// NumRequeues use. The limiters of package backoff work, and so does any
// client-go rate limiter (workqueue.TypedRateLimiter has the same method
// set). Default, and when l is nil: backoff.DefaultController on the
// queue's clock, which is client-go's default controller rate limiter
// (per-key exponential 5ms to 1000s, and an overall 10 qps bucket with a
// burst of 100). A limiter that returns rate.InfDuration (a zero-rate
// bucket) parks the key: see AddAfter. K must be the queue's key type, or
// New panics.
func WithRateLimiter[K comparable](l backoff.Limiter[K]) Option {
	return func(c *config) {
		if l != nil {
			c.rateLimiter = l
		}
	}
}

// WithClock sets the clock for delays, ageing, the default rate limiter and
// metrics; client-go's fake clock (k8s.io/utils/clock/testing) makes
// time-based tests deterministic. Default, and when clk is nil: the real
// clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithMetrics makes the queue report into m (see NewMetrics), which outlives
// the queue: a new queue on the same m keeps its counters counting. Default,
// and when m is nil: no metrics, and no clock reads on the hot path.
func WithMetrics(m *Metrics) Option {
	return func(c *config) { c.metrics = m }
}

// WithGroup turns on fairness: within a priority, Get serves the groups that
// group returns (a tenant, a namespace) round-robin, so one group's flood of
// keys cannot starve another's. group must be fast and return the same
// group for a key every time. K must be the queue's key type, or New
// panics. Default, and when group is nil: no groups, plain FIFO within a
// priority.
func WithGroup[K comparable](group func(K) string) Option {
	return func(c *config) {
		if group != nil {
			c.groupOf = group
		}
	}
}

// WithReadyTimes makes the queue note when each key became ready, as
// WithMetrics does, so that Stats reports the oldest ready key's wait and
// Inspect a key's ready time: adds, Get and Done then read the clock once
// each. Debug pages turn it on. Default: off; with WithMetrics the times are
// noted anyway, and with ageing on (the default) they are noted only while
// keys of several priorities are ready.
func WithReadyTimes() Option {
	return func(c *config) { c.readyTimes = true }
}

// DefaultAgeing is the ageing bound of a queue without WithAgeing.
//
// The bound is how long priorities are strict. A key that has waited longer
// than that goes ahead of fresher keys whatever their priority, so the
// bound is also the longest fresh changes keep their head start over a
// backlog of low-priority keys (an informer's initial list, a resync). Half
// a minute keeps that head start for any initial list a controller gets
// through in half a minute (thousands of keys at ordinary reconcile rates),
// which a bound of a few seconds would not; yet a listed key behind a
// saturated normal lane still waits about half a minute rather than for
// ever, far below resync periods and the 1000s backoff cap.
const DefaultAgeing = 30 * time.Second

// NoAgeing, given to WithAgeing, turns ageing off: priorities are strict,
// and a lower-priority key waits for as long as higher-priority keys keep
// coming. It saves the clock read that ageing makes on adds and Gets while
// keys of several priorities are ready, and 16 bytes per key.
const NoAgeing = time.Duration(math.MaxInt64)

// WithAgeing sets the ageing bound: a ready key that has waited for bound
// is served next, whatever its priority; keys that have all waited that
// long are served oldest first. See package queue's documentation for how the
// wait is measured. Default, and when bound is zero or negative:
// DefaultAgeing. NoAgeing turns ageing off.
func WithAgeing(bound time.Duration) Option {
	return func(c *config) { c.ageing = bound }
}

// optionFor returns v as T, or the zero T if v is nil. It returns an error
// if v holds another type: that is an option built for another key type.
func optionFor[T any](option string, v any) (T, error) {
	var zero T
	if v == nil {
		return zero, nil
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("queue.New: %s: got %T, want %v: the option was built for another key type", option, v, reflect.TypeFor[T]())
	}
	return t, nil
}
