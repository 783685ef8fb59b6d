package queue

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/workqueue"
)

// Option configures a Queue in New. A nil Option, and an option given a nil
// value (a nil limiter, clock, group function or Metrics), make New return
// an error naming it: to keep an option's default, leave the option out.
//
// Options are not generic: with Option[K], every option that carries no
// key-typed value (WithClock, WithMetrics, WithAgeing) would need its type
// argument spelled out at the call site (queue.WithClock[string](clk)),
// because Go does not infer a type argument from the parameter a call's
// result is passed to. The two options that do carry key-typed values,
// WithRateLimiter and WithGroup, infer K from their argument and are checked
// against the queue's key type when New runs.
type Option func(*config)

// config collects the engine's options, in the order given, and what is
// wrong with the options that cannot work, for New to report all at once.
type config struct {
	opts []workqueue.Option
	bad  []error
}

func (c *config) add(o workqueue.Option) { c.opts = append(c.opts, o) }

// refuse records that option, called with arg, cannot work. The error says
// what leaving the option out gives, which is what a caller who passed nil
// most likely wanted.
func (c *config) refuse(option, arg, omitted string) {
	c.bad = append(c.bad, fmt.Errorf("%s(%s): omit the option for %s", option, arg, omitted))
}

// nilArg reports whether v, given for a parameter of interface type, is nil
// or holds a nil pointer, map, channel or function, whose methods would fail
// on first use (a nil *FakeClock's Now, a nil *backoff.PerKey's When), and
// how to show v in an error.
func nilArg(v any) (arg string, isNil bool) {
	if v == nil {
		return "nil", true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func:
		if rv.IsNil() {
			return fmt.Sprintf("(%T)(nil)", v), true
		}
	}
	return "", false
}

// WithRateLimiter sets the limiter that AddRateLimited, Forget and
// NumRequeues use. The limiters of package backoff work, and so does any
// client-go rate limiter (workqueue.TypedRateLimiter has the same method
// set). Default: backoff.DefaultController on the queue's clock, which is
// client-go's default controller rate limiter (per-key exponential 5ms to
// 1000s, and an overall 10 qps bucket with a burst of 100). A limiter that
// returns rate.InfDuration (a zero-rate bucket) parks the key: see
// AddAfter. K must be the queue's key type, and l not nil (nor a nil
// pointer), or New returns an error.
func WithRateLimiter[K comparable](l backoff.Limiter[K]) Option {
	return func(c *config) {
		if arg, isNil := nilArg(l); isNil {
			c.refuse("WithRateLimiter", arg, "backoff.DefaultController")
			return
		}
		c.add(workqueue.WithRateLimiter(l))
	}
}

// WithClock sets the clock for delays, ageing, the default rate limiter and
// metrics; client-go's fake clock (k8s.io/utils/clock/testing) makes
// time-based tests deterministic. Default: the real clock. clk must not be
// nil (nor a nil pointer), or New returns an error.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) {
		if arg, isNil := nilArg(clk); isNil {
			c.refuse("WithClock", arg, "the real clock")
			return
		}
		c.add(workqueue.WithClock(clk))
	}
}

// WithMetrics makes the queue report into m (see NewMetrics), which outlives
// the queue: a new queue on the same m keeps its counters counting.
// Default: no metrics, and no clock reads on the hot path. m must be made
// by NewMetrics (a nil or zero Metrics reports nowhere), or New returns an
// error.
func WithMetrics(m *Metrics) Option {
	return func(c *config) {
		switch {
		case m == nil:
			c.refuse("WithMetrics", "nil", "no metrics")
		case m.e == nil:
			c.bad = append(c.bad, errors.New("WithMetrics: the Metrics was not made by NewMetrics"))
		default:
			c.add(workqueue.WithMetrics(m.e))
		}
	}
}

// WithGroup turns on fairness: within a priority, Get serves the groups that
// group returns (a tenant, a namespace) round-robin, so one group's flood of
// keys cannot starve another's. group must be fast and return the same
// group for a key every time. K must be the queue's key type, and group
// not nil, or New returns an error. Default: no groups, plain FIFO within a
// priority.
func WithGroup[K comparable](group func(K) string) Option {
	return func(c *config) {
		if group == nil {
			c.refuse("WithGroup", "nil", "no groups")
			return
		}
		c.add(workqueue.WithGroup(group))
	}
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
