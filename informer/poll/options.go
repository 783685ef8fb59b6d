package poll

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of the options.
const (
	DefaultInterval = 10 * time.Second
	DefaultJitter   = 0.1
)

// Option configures a Source in New.
//
// Options are values of an interface rather than functions so that those
// not about V need no type argument: poll.WithInterval(time.Minute) works
// for any Source[K, V].
type Option[V any] interface {
	apply(*config)
}

type config struct {
	interval time.Duration
	jitter   float64
	equal    any // equalOption[V]; nil: reflect.DeepEqual
	clock    clock.WithTicker
}

// CommonOption is an Option for a Source of any V: what WithInterval,
// WithJitter and WithClock return.
type CommonOption func(*config)

func (f CommonOption) apply(c *config) { f(c) }

// equalOption is what WithEqual returns. Its V is checked in New, because
// an interface cannot tie apply to it.
type equalOption[V any] func(a, b V) bool

func (f equalOption[V]) apply(c *config) { c.equal = f }

// WithInterval sets how long Watch waits between lists, before jitter. It
// must be positive, or New returns an error. Default: DefaultInterval.
func WithInterval(d time.Duration) CommonOption {
	return func(c *config) { c.interval = d }
}

// WithJitter spreads the waits: each is uniform in [d*(1-f), d*(1+f)] for
// the interval d, so that many pollers started together do not hit the
// backend in step. f must be in [0, 1], or New returns an error; 0 turns jitter off.
// Default: DefaultJitter.
func WithJitter(f float64) CommonOption {
	return func(c *config) { c.jitter = f }
}

// WithClock sets the clock that times the waits; client-go's fake clock
// (k8s.io/utils/clock/testing) makes tests deterministic. Default: the real
// clock.
func WithClock(clk clock.WithTicker) CommonOption {
	return func(c *config) { c.clock = clk }
}

// WithEqual sets how a diff decides that a key's value changed: a change
// emits a Put, so equal must say false only for a real change.
//
// The default, reflect.DeepEqual, is correct for any V but slow: it walks
// every field by reflection, for every key on every poll, which dominates
// the cost of polling large objects. A cheap comparison is better whenever
// the backend offers one: an ETag, a resource version, a modification time
// and size, or == for comparable values. V must be the Source's value type,
// or New returns an error; a nil equal keeps the default.
func WithEqual[V any](equal func(a, b V) bool) Option[V] {
	if equal == nil {
		return CommonOption(func(*config) {})
	}
	return equalOption[V](equal)
}

func newConfig[V any](opts []Option[V]) (config, func(a, b V) bool, error) {
	c := config{interval: DefaultInterval, jitter: DefaultJitter, clock: clock.RealClock{}}
	for i, o := range opts {
		if o == nil {
			return c, nil, fmt.Errorf("option %d is nil", i)
		}
		o.apply(&c)
	}
	if c.interval <= 0 {
		return c, nil, fmt.Errorf("WithInterval(%v): the interval must be positive", c.interval)
	}
	if !(c.jitter >= 0 && c.jitter <= 1) {
		return c, nil, fmt.Errorf("WithJitter(%v): the fraction must be in [0, 1]", c.jitter)
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.equal == nil {
		return c, func(a, b V) bool { return reflect.DeepEqual(a, b) }, nil
	}
	equal, ok := c.equal.(equalOption[V])
	if !ok {
		return c, nil, fmt.Errorf("WithEqual: got %T, want %v: the option was built for another value type",
			c.equal, reflect.TypeFor[func(a, b V) bool]())
	}
	return c, equal, nil
}
