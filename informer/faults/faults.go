// Package faults wraps an informer.Source so that it fails the way real
// stores do, at random but reproducibly: lists fail, watches drop mid-stream,
// revisions expire as if compacted, events arrive late or twice, or are
// coalesced so that a key's intermediate values are never seen. A test
// runs an informer (or a whole controller) against the wrapper, lets it
// churn, then calls Heal and asserts that everything converged.
//
// Every fault stays within the Source contract, so an informer that breaks
// under it has a bug, not an excuse: no change is invented, dropped without
// an error, or reordered; a duplicate is the same change emitted again at
// once; a coalesced window emits, in revision order, each key's latest
// event of it (a subsequence of the key's changes, as from a polling
// source); an expiry is an error that errors.Is informer.ErrRevisionExpired;
// every other fault is an error wrapping ErrInjected.
//
// Decisions come from a math/rand/v2 PCG seeded by the caller, drawn under
// a lock, so a run that calls List and Watch in the same order makes the
// same decisions. Concurrent writers to the underlying store can still
// change that order; log the seed so a failure can at least be replayed.
package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// ErrInjected is wrapped by every error the wrapper makes up, except
// expiries, which wrap informer.ErrRevisionExpired instead.
var ErrInjected = errors.New("faults: injected failure")

// Rates are the probabilities, each in [0, 1], of each fault. A rate of 0
// turns that fault off.
type Rates struct {
	// ListError: a List fails without listing.
	ListError float64
	// WatchError: a Watch fails as it starts; and, separately for each
	// event, the watch is dropped there, with the event either emitted
	// first or not at all (it is then emitted again by the next watch,
	// which resumes before it).
	WatchError float64
	// Expire: like WatchError, but the failure is an expired revision, as
	// if the store had compacted, so the informer must list again.
	Expire float64
	// Duplicate: an event is emitted twice in a row.
	Duplicate float64
	// Delay: an event waits up to MaxDelay (uniformly) before it is
	// emitted, holding back every later event of the watch too.
	Delay    float64
	MaxDelay time.Duration
	// Coalesce: an event that arrives while no window is open opens one
	// of CoalesceWindow, with this probability. Until the window closes
	// the watch emits nothing; then it emits, in revision order, only the
	// latest event of each key that arrived in it, so the intermediate
	// values of a key are never seen, as from a source that polls (a
	// transient state between two writes goes unobserved). Both must be
	// set for it to happen.
	Coalesce       float64
	CoalesceWindow time.Duration
}

// DefaultRates fail often enough that a few hundred events exercise every
// path of an informer, and rarely enough that it still makes progress.
var DefaultRates = Rates{
	ListError:  0.3,
	WatchError: 0.03,
	Expire:     0.01,
	Duplicate:  0.05,
	Delay:      0.02,
	MaxDelay:   2 * time.Millisecond,
}

// Counts says how many faults of each kind a Source has injected.
type Counts struct {
	ListErrors, WatchErrors, Expired, Duplicates, Delays uint64
	// Coalesced counts events dropped because a later event of their key
	// (or a later bookmark) came in the same window.
	Coalesced uint64
}

// Option configures a Source in New.
type Option func(*config)

type config struct {
	rates Rates
	clock clock.Clock
}

// WithRates sets the fault rates. Default: DefaultRates.
func WithRates(r Rates) Option {
	return func(c *config) { c.rates = r }
}

// WithClock sets the clock that delays are measured on. Default: the real
// clock.
func WithClock(clk clock.Clock) Option {
	return func(c *config) { c.clock = clk }
}

// Source is an informer.Source that injects faults into another. Create one
// with New. It is safe for concurrent use, as the contract requires.
type Source[K comparable, V any] struct {
	src   informer.Source[K, V]
	rates Rates
	clock clock.Clock

	// healthy turns every fault off while true.
	healthy atomic.Bool
	counts  struct {
		listErrors, watchErrors, expired, duplicates, delays, coalesced atomic.Uint64
	}

	mu  sync.Mutex
	rnd *rand.Rand // guarded by mu
}

// Compile-time proof that a Source is a Source.
var _ informer.Source[string, int] = (*Source[string, int])(nil)

// New wraps src with faults drawn from seed. Faults are on until Heal. It
// returns an error, naming the option, for a nil src, a nil option, a rate
// outside [0, 1] or a negative duration.
func New[K comparable, V any](src informer.Source[K, V], seed uint64, opts ...Option) (*Source[K, V], error) {
	if src == nil {
		return nil, errors.New("faults.New: nil Source")
	}
	c := config{rates: DefaultRates}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("faults.New: option %d is nil", i)
		}
		o(&c)
	}
	if err := c.rates.validate(); err != nil {
		return nil, fmt.Errorf("faults.New: WithRates: %w", err)
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return &Source[K, V]{
		src:   src,
		rates: c.rates,
		clock: c.clock,
		rnd:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}, nil
}

// validate reports a probability outside [0, 1] or a negative duration.
func (r Rates) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"ListError", r.ListError}, {"WatchError", r.WatchError}, {"Expire", r.Expire},
		{"Duplicate", r.Duplicate}, {"Delay", r.Delay}, {"Coalesce", r.Coalesce}} {
		if !(p.v >= 0 && p.v <= 1) { // also rejects NaN
			return fmt.Errorf("%s %v: want a probability in [0, 1]", p.name, p.v)
		}
	}
	if r.MaxDelay < 0 || r.CoalesceWindow < 0 {
		return fmt.Errorf("MaxDelay %v, CoalesceWindow %v: want durations >= 0", r.MaxDelay, r.CoalesceWindow)
	}
	return nil
}

// Heal turns every fault off, for a test's phase in which the system must
// converge. Calls in progress see the change at their next decision; a
// delay already begun runs out.
func (s *Source[K, V]) Heal() { s.healthy.Store(true) }

// Break turns the faults on again after Heal, as New starts them.
func (s *Source[K, V]) Break() { s.healthy.Store(false) }

// Counts returns how many faults have been injected so far.
func (s *Source[K, V]) Counts() Counts {
	return Counts{
		ListErrors:  s.counts.listErrors.Load(),
		WatchErrors: s.counts.watchErrors.Load(),
		Expired:     s.counts.expired.Load(),
		Duplicates:  s.counts.duplicates.Load(),
		Delays:      s.counts.delays.Load(),
		Coalesced:   s.counts.coalesced.Load(),
	}
}

// roll reports true with probability p, unless the source is healthy.
func (s *Source[K, V]) roll(p float64) bool {
	if p <= 0 || s.healthy.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.Float64() < p
}

// delay draws a delay in [0, MaxDelay].
func (s *Source[K, V]) delay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.rnd.Int64N(int64(s.rates.MaxDelay) + 1))
}

// List fails with probability Rates.ListError, and otherwise lists the
// wrapped source.
func (s *Source[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if s.roll(s.rates.ListError) {
		s.counts.listErrors.Add(1)
		return nil, 0, fmt.Errorf("list: %w", ErrInjected)
	}
	return s.src.List(ctx)
}

// Watch watches the wrapped source after after, injecting faults into the
// stream as Rates say.
func (s *Source[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	if err := s.fail(after); err != nil {
		return err
	}
	if s.rates.Coalesce > 0 && s.rates.CoalesceWindow > 0 {
		return s.coalescing(ctx, after, emit)
	}
	return s.watch(ctx, after, emit)
}

// watch is Watch's stream of the wrapped source with the per-event faults:
// delays, drops, expiries and duplicates.
func (s *Source[K, V]) watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	// The wrapped source returns what emit returns, so an injected error
	// ends its watch; it is reported as is.
	return s.src.Watch(ctx, after, func(ev informer.Event[K, V]) error {
		if s.rates.MaxDelay > 0 && s.roll(s.rates.Delay) {
			s.counts.delays.Add(1)
			t := s.clock.NewTimer(s.delay())
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C():
			}
		}
		emitFirst := s.roll(0.5)
		if err := s.fail(ev.Revision); err != nil {
			if emitFirst {
				if e := emit(ev); e != nil {
					return e
				}
			}
			return err
		}
		if err := emit(ev); err != nil {
			return err
		}
		if s.roll(s.rates.Duplicate) {
			s.counts.duplicates.Add(1)
			return emit(ev)
		}
		return nil
	})
}

// fail returns an injected watch error or expiry, or nil.
func (s *Source[K, V]) fail(at informer.Revision) error {
	if s.roll(s.rates.Expire) {
		s.counts.expired.Add(1)
		return fmt.Errorf("watch at revision %d: simulated compaction: %w", at, informer.ErrRevisionExpired)
	}
	if s.roll(s.rates.WatchError) {
		s.counts.watchErrors.Add(1)
		return fmt.Errorf("watch at revision %d: dropped: %w", at, ErrInjected)
	}
	return nil
}
