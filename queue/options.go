package queue

import (
	"math"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/workqueue"
)

// Option configures a Queue in New. A nil Option is ignored, like a nil
// limiter or group function, so that options can be chosen conditionally.
//
// Options are not generic: with Option[K], every option that carries no
// key-typed value (WithClock, WithMetrics, WithAgeing) would need its type
// argument spelled out at the call site (queue.WithClock[string](clk)),
// because Go does not infer a type argument from the parameter a call's
// result is passed to. The two options that do carry key-typed values,
// WithRateLimiter and WithGroup, infer K from their argument and are checked
// against the queue's key type when New runs.
type Option func(*config)

// config collects the engine's options, in the order given.
type config struct{ opts []workqueue.Option }

func (c *config) add(o workqueue.Option) { c.opts = append(c.opts, o) }

// WithRateLimiter sets the limiter that AddRateLimited, Forget and
// NumRequeues use. The limiters of package backoff work, and so does any
// client-go rate limiter (workqueue.TypedRateLimiter has the same method
// set). Default, and when l is nil: backoff.DefaultController on the
// queue's clock, which is client-go's default controller rate limiter
// (per-key exponential 5ms to 1000s, and an overall 10 qps bucket with a
// burst of 100). A limiter that returns rate.InfDuration (a zero-rate
// bucket) parks the key: see AddAfter. K must be the queue's key type, or
// New returns an error.
func WithRateLimiter[K comparable](l backoff.Limiter[K]) Option {
	return func(c *config) { c.add(workqueue.WithRateLimiter(l)) }
}

// WithClock sets the clock for delays, ageing, the default rate limiter and
// metrics; client-go's fake clock (k8s.io/utils/clock/testing) makes
// time-based tests deterministic. Default, and when clk is nil: the real
// clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) { c.add(workqueue.WithClock(clk)) }
}

// WithMetrics makes the queue report into m (see NewMetrics), which outlives
// the queue: a new queue on the same m keeps its counters counting. Default,
// and when m is nil: no metrics, and no clock reads on the hot path.
func WithMetrics(m *Metrics) Option {
	return func(c *config) { c.add(workqueue.WithMetrics(m.engine())) }
}

// WithGroup turns on fairness: within a priority, Get serves the groups that
// group returns (a tenant, a namespace) round-robin, so one group's flood of
// keys cannot starve another's. group must be fast and return the same
// group for a key every time. K must be the queue's key type, or New
// returns an error. Default, and when group is nil: no groups, plain FIFO
// within a priority.
func WithGroup[K comparable](group func(K) string) Option {
	return func(c *config) { c.add(workqueue.WithGroup(group)) }
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
// long are served oldest first. See the package documentation for how the
// wait is measured. Default, and when bound is zero or negative:
// DefaultAgeing. NoAgeing turns ageing off.
func WithAgeing(bound time.Duration) Option {
	return func(c *config) { c.add(workqueue.WithAgeing(bound)) }
}
