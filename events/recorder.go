package events

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Defaults of a Recorder's options.
const (
	// DefaultBurst and DefaultRefill are the per-key rate limit: a key may
	// get DefaultBurst new events at once, then one every DefaultRefill,
	// so at most 25 + 6 in its first minute and 6 a minute in a hot loop.
	// (client-go's spam filter allows a burst of 25, then one per 5 min.)
	DefaultBurst  = 25
	DefaultRefill = 10 * time.Second
	// DefaultMaxKeys bounds the keys a recorder correlates (as client-go's
	// LRU of 4096 correlations).
	DefaultMaxKeys = 4096
	// MaxEventsPerKey bounds the distinct events a recorder correlates per
	// key; the least recently recorded one is forgotten for a new one.
	MaxEventsPerKey = 32
	// DefaultMaxMessageBytes truncates messages, as events.k8s.io/v1's
	// note is limited to 1 KiB.
	DefaultMaxMessageBytes = 1024
)

// Stats counts what a Recorder did with the events it was given.
type Stats struct {
	// Recorded counts new events handed to the sinks.
	Recorded uint64
	// Merged counts repeats counted into an event the recorder held.
	Merged uint64
	// RateLimited counts new events dropped by the per-key rate limit.
	RateLimited uint64
	// Invalid counts events dropped for a Type other than Normal or
	// Warning, or an empty reason.
	Invalid uint64
}

// Sink receives every new or counted-again event from a Recorder. Write is
// called after the recorder's lock is released, from the goroutine that
// recorded the event, so it must be quick and must not block (StoreSink only
// queues the event). Two versions of one event may arrive out of order from
// concurrent callers: a sink keeps the one with the larger Count.
type Sink interface {
	Write(ctx context.Context, e Event)
}

// Option configures a Recorder; NewRecorder returns an error for a bad
// value.
type Option func(*Recorder)

// WithSink adds a sink; a recorder may have several. Without any, the
// recorder only counts.
func WithSink(s Sink) Option {
	return func(r *Recorder) {
		if s == nil {
			r.bad = append(r.bad, errors.New("WithSink(nil)"))
			return
		}
		r.sinks = append(r.sinks, s)
	}
}

// WithClock sets the clock that stamps events and refills the rate limit;
// k8s.io/utils/clock/testing's fake clocks make tests deterministic.
// Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(r *Recorder) {
		if c == nil {
			r.bad = append(r.bad, errors.New("WithClock(nil)"))
			return
		}
		r.clock = c
	}
}

// WithRateLimit sets the per-key token bucket (a golang.org/x/time/rate
// Limiter on the recorder's clock): burst new events at once (burst >= 1),
// then one every refill (refill > 0). Default DefaultBurst, DefaultRefill.
func WithRateLimit(burst int, refill time.Duration) Option {
	return func(r *Recorder) {
		if burst < 1 || refill <= 0 {
			r.bad = append(r.bad, fmt.Errorf("WithRateLimit(%d, %v): want burst >= 1 and refill > 0", burst, refill))
			return
		}
		r.burst, r.refill = burst, refill
	}
}

// WithMaxKeys bounds the keys the recorder correlates (n >= 1); the least
// recently recorded key is forgotten, with its rate limit, for a new one.
// Default DefaultMaxKeys.
func WithMaxKeys(n int) Option {
	return func(r *Recorder) {
		if n < 1 {
			r.bad = append(r.bad, fmt.Errorf("WithMaxKeys(%d): want >= 1", n))
			return
		}
		r.maxKeys = n
	}
}

// WithMaxMessageBytes truncates longer messages to n bytes (n >= 16),
// marking the cut with "…". Default DefaultMaxMessageBytes.
func WithMaxMessageBytes(n int) Option {
	return func(r *Recorder) {
		if n < 16 {
			r.bad = append(r.bad, fmt.Errorf("WithMaxMessageBytes(%d): want >= 16", n))
			return
		}
		r.maxMessage = n
	}
}

// WithContextID sets how an event's ReconcileID is read from the context
// given to Event: with a converge controller, reconcile.ReconcileID.
// Default: none, ReconcileID stays empty.
func WithContextID(id func(context.Context) string) Option {
	return func(r *Recorder) {
		if id == nil {
			r.bad = append(r.bad, errors.New("WithContextID(nil)"))
			return
		}
		r.contextID = id
	}
}

// Recorder deduplicates, rate-limits and hands events to its sinks. Create
// one with NewRecorder; it is safe for concurrent use. A nil *Recorder
// records nothing.
type Recorder struct {
	source     string
	sinks      []Sink
	clock      clock.PassiveClock
	burst      int
	refill     time.Duration
	maxKeys    int
	maxMessage int
	contextID  func(context.Context) string
	// bad holds the options' errors, for NewRecorder to return.
	bad []error

	mu sync.Mutex
	// keys holds the correlated keys, and lru orders them, most recently
	// recorded first (its values are *keyState); guarded by mu.
	keys map[string]*keyState
	lru  *list.List

	recorded, merged, rateLimited, invalid atomic.Uint64
}

// keyState is what the recorder remembers of one key.
type keyState struct {
	key  string
	elem *list.Element
	// limit is the key's rate limit, on the times the recorder gives it.
	limit *rate.Limiter
	// events are the key's correlated events, most recently recorded
	// first; at most MaxEventsPerKey.
	events []*Event
}

// NewRecorder returns a recorder whose events name source as their Source
// (the component, e.g. "replicaset-controller"). It returns an error,
// naming the option, for an empty source, a nil option or a bad option value
// (a nil sink, clock or context function, a burst below 1 or a refill not
// above 0, fewer than 1 key, a message bound below 16 bytes).
func NewRecorder(source string, opts ...Option) (*Recorder, error) {
	if source == "" {
		return nil, errors.New("events.NewRecorder: empty source")
	}
	r := &Recorder{
		source:     source,
		clock:      clock.RealClock{},
		burst:      DefaultBurst,
		refill:     DefaultRefill,
		maxKeys:    DefaultMaxKeys,
		maxMessage: DefaultMaxMessageBytes,
		keys:       make(map[string]*keyState),
		lru:        list.New(),
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("events.NewRecorder(%q): option %d is nil", source, i)
		}
		o(r)
	}
	if err := errors.Join(r.bad...); err != nil {
		return nil, fmt.Errorf("events.NewRecorder(%q): %w", source, err)
	}
	r.bad = nil
	return r, nil
}

// Source returns the recorder's source.
func (r *Recorder) Source() string { return r.source }

// Sinks returns the recorder's sinks, in the order given to WithSink: a
// debug page finds its MemorySink among them. Nil for a nil Recorder.
func (r *Recorder) Sinks() []Sink {
	if r == nil {
		return nil
	}
	return slices.Clone(r.sinks)
}

// Eventf is Event with a message formatted by fmt.Sprintf. The message is
// formatted before the recorder can tell a repeat, so a hot loop pays for it.
func (r *Recorder) Eventf(ctx context.Context, key string, typ Type, reason, format string, args ...any) {
	if r == nil {
		return
	}
	r.Event(ctx, key, typ, reason, fmt.Sprintf(format, args...))
}

// Event records that reason happened to key. An event equal in key, type,
// reason and message (after truncation) to one the recorder holds is
// counted into it; a new one takes a token from key's rate limit, or is
// dropped if there is none. Either way the event's new version is handed to
// every sink. typ must be Normal or Warning and reason non-empty, or the
// event is dropped (Stats.Invalid).
//
// ctx is not a deadline: an event is recorded even under a done ctx (an
// event about a cancelled reconcile is still news). It supplies the
// ReconcileID (WithContextID), and is passed to the sinks.
func (r *Recorder) Event(ctx context.Context, key string, typ Type, reason, message string) {
	if r == nil {
		return
	}
	if !typ.Valid() || reason == "" {
		r.invalid.Add(1)
		return
	}
	message = truncate(message, r.maxMessage)
	var id string
	if r.contextID != nil {
		id = r.contextID(ctx)
	}
	now := r.clock.Now()

	r.mu.Lock()
	ks := r.keyLocked(key)
	e, ok := ks.find(typ, reason, message)
	if ok {
		e.Count++
		e.Last, e.ReconcileID = now, id
		ks.touch(e)
		r.merged.Add(1)
	} else {
		if !ks.limit.AllowN(now, 1) {
			r.mu.Unlock()
			r.rateLimited.Add(1)
			return
		}
		e = &Event{ID: EventID(r.source, key, typ, reason, message), Key: key, Source: r.source,
			Type: typ, Reason: reason, Message: message, Count: 1, First: now, Last: now, ReconcileID: id}
		ks.add(e)
		r.recorded.Add(1)
	}
	out := *e
	r.mu.Unlock()

	for _, s := range r.sinks {
		s.Write(ctx, out)
	}
}

// Stats returns the recorder's counters; zero for a nil recorder.
func (r *Recorder) Stats() Stats {
	if r == nil {
		return Stats{}
	}
	return Stats{Recorded: r.recorded.Load(), Merged: r.merged.Load(),
		RateLimited: r.rateLimited.Load(), Invalid: r.invalid.Load()}
}

// keyLocked returns key's state, creating it with a full bucket and
// evicting the least recently recorded key beyond maxKeys, and marks it
// the most recently recorded.
func (r *Recorder) keyLocked(key string) *keyState {
	if ks, ok := r.keys[key]; ok {
		r.lru.MoveToFront(ks.elem)
		return ks
	}
	if len(r.keys) >= r.maxKeys {
		old := r.lru.Remove(r.lru.Back()).(*keyState)
		delete(r.keys, old.key)
	}
	ks := &keyState{key: key, limit: rate.NewLimiter(rate.Every(r.refill), r.burst)}
	ks.elem = r.lru.PushFront(ks)
	r.keys[key] = ks
	return ks
}

func (ks *keyState) find(typ Type, reason, message string) (*Event, bool) {
	for _, e := range ks.events {
		if e.Type == typ && e.Reason == reason && e.Message == message {
			return e, true
		}
	}
	return nil, false
}

// touch moves e, which was just recorded again, to the front.
func (ks *keyState) touch(e *Event) {
	for i, x := range ks.events {
		if x == e {
			copy(ks.events[1:i+1], ks.events[:i])
			ks.events[0] = e
			return
		}
	}
}

// add puts a new event first, forgetting the least recently recorded one
// beyond MaxEventsPerKey.
func (ks *keyState) add(e *Event) {
	if len(ks.events) < MaxEventsPerKey {
		ks.events = append(ks.events, nil)
	}
	copy(ks.events[1:], ks.events[:len(ks.events)-1])
	ks.events[0] = e
}
