package informer

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/backoff"
)

// defaultWatchBackoff is WithWatchBackoff's default (documented there).
// Unexported, so that a program cannot change every later informer's
// backoff from afar: an informer that wants another says so with the
// option.
var defaultWatchBackoff = backoff.Exponential{
	Base:   100 * time.Millisecond,
	Cap:    30 * time.Second,
	Jitter: backoff.FullJitter,
}

// backoffResetAfter is how long a watch must have run, if it delivered
// nothing new, for the next failure to count as the first again. A watch
// that moved the revision forward resets the backoff at once; one that only
// re-sent what the informer had does not.
const backoffResetAfter = time.Minute

// Option configures an Informer in New.
//
// Options are not generic, so that most call sites stay short; the two
// that carry typed functions (WithTransform, WithIndex) are checked against
// the informer's types when New runs, and New returns an error on a
// mismatch.
type Option func(*config)

type config struct {
	resync    time.Duration
	backoff   *backoff.Exponential
	clock     clock.WithTicker
	logger    *slog.Logger
	transform any // func(V) V
	indexes   []namedIndex
}

type namedIndex struct {
	name string
	fn   any // IndexFunc[K, V]
}

// WithResync sets how often every cached key is re-delivered to every
// handler as an OnUpdate with old == new, so that a controller that
// dropped a key (a bug, a crash between dequeue and requeue) picks it up
// again. Keys with a change already pending for a handler are not
// re-delivered to it twice. Default, and for period <= 0: no resync.
func WithResync(period time.Duration) Option {
	return func(c *config) { c.resync = period }
}

// WithWatchBackoff sets the delays between failed lists and watches. It is
// used as given, so its zero fields take package backoff's defaults, not
// this option's default. Default: 100ms doubling up to 30s, with full
// jitter, so that many informers that lost one store do not reconnect in
// step.
func WithWatchBackoff(b backoff.Exponential) Option {
	return func(c *config) { c.backoff = &b }
}

// WithClock sets the clock for backoff and resync; client-go's fake clock
// (k8s.io/utils/clock/testing) makes them deterministic in tests. Default:
// the real clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) { c.clock = clk }
}

// WithLogger sets where list and watch failures are logged (at Warn) and
// restarts and relists (at Info and Debug). Default: slog.Default(), because
// a store the informer cannot reach is something an operator should see
// without configuring anything; pass a logger with a discarding handler to
// silence it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithTransform sets a function applied to every value as it enters the
// cache (from lists and from watch events), before indexing and before
// handlers see it: typically to drop fields nobody reads, and so save
// memory. It must not modify a value the source may still hold; return a
// trimmed copy instead. V must be the informer's value type, or New returns
// an error.
// Default: values are cached as the source returns them.
func WithTransform[V any](fn func(V) V) Option {
	return func(c *config) {
		if fn != nil {
			c.transform = fn
		}
	}
}

// WithIndex adds a secondary index named name, queried with
// Informer.ByIndex. K and V must be the informer's types, fn must not be
// nil, and names must be unique, or New returns an error. Default: no
// indexes.
func WithIndex[K comparable, V any](name string, fn IndexFunc[K, V]) Option {
	return func(c *config) { c.indexes = append(c.indexes, namedIndex{name: name, fn: fn}) }
}

// optionFor returns v as T, or the zero T if v is nil. It returns an error
// if v holds another type: that is an option built for another key or value
// type.
func optionFor[T any](option string, v any) (T, error) {
	var zero T
	if v == nil {
		return zero, nil
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s: got %T, want %v: the option was built for other key or value types", option, v, reflect.TypeFor[T]())
	}
	return t, nil
}
