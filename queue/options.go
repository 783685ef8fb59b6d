package queue

import (
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Option configures a Queue in New.
//
// Options are not generic so that New's call site stays short; the two that
// carry key-typed values (WithRateLimiter, WithGroup) are checked against the
// queue's key type when New runs.
type Option func(*config)

type config struct {
	name        string
	rateLimiter any // workqueue.TypedRateLimiter[K]
	clock       clock.WithTicker
	registerer  prometheus.Registerer
	groupOf     any // func(K) string
}

// WithName names the queue. The name is the name label of its metrics.
// Default: "" (allowed without metrics).
func WithName(name string) Option {
	return func(c *config) { c.name = name }
}

// WithRateLimiter sets the limiter that AddRateLimited, Forget and
// NumRequeues use. Any client-go rate limiter works, as do those of package
// backoff. Default, and when l is nil: backoff.DefaultController, which is
// client-go's default controller rate limiter (per-key exponential 5ms to
// 1000s, and an overall 10 qps bucket with a burst of 100). K must be the
// queue's key type, or New panics.
func WithRateLimiter[K comparable](l workqueue.TypedRateLimiter[K]) Option {
	return func(c *config) {
		if l != nil {
			c.rateLimiter = l
		}
	}
}

// WithClock sets the clock for delays and metrics; client-go's fake clock
// (k8s.io/utils/clock/testing) makes time-based tests deterministic. Default:
// the real clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) { c.clock = clk }
}

// WithMetrics registers the queue's workqueue_* metrics on reg, labelled with
// the queue's name, which must be set with WithName. ShutDown unregisters
// them. Default: no metrics, and no clock reads on the hot path.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) { c.registerer = reg }
}

// WithGroup turns on fairness: within a priority, Get serves the groups that
// group returns (a tenant, a namespace) round-robin, so one group's flood of
// keys cannot starve another's. group must be fast and return the same
// group for a key every time. K must be the queue's key type, or New
// panics. Default: no groups, plain FIFO within a priority.
func WithGroup[K comparable](group func(K) string) Option {
	return func(c *config) {
		if group != nil {
			c.groupOf = group
		}
	}
}

// optionFor returns v as T, or the zero T if v is nil. It panics if v holds
// another type: that is an option built for another key type.
func optionFor[T any](option string, v any) T {
	var zero T
	if v == nil {
		return zero
	}
	t, ok := v.(T)
	if !ok {
		panic(fmt.Sprintf("queue: %s: got %T, want %v: the option was built for another key type", option, v, reflect.TypeFor[T]()))
	}
	return t
}
