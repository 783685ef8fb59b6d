package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// Defaults of a StoreSink's options.
const (
	// DefaultStorePrefix is put before every store key: <prefix><key>/<ID>.
	DefaultStorePrefix = "events/"
	// DefaultMaxPending bounds the events waiting to be written.
	DefaultMaxPending = 1000
	// DefaultRetryInterval is how long Run waits after a failed write
	// before it tries again.
	DefaultRetryInterval = time.Second
)

// StoreOption configures a StoreSink; a bad value panics in NewStoreSink.
type StoreOption func(*StoreSink)

// WithPrefix sets the prefix of the sink's store keys. Default
// DefaultStorePrefix.
func WithPrefix(p string) StoreOption { return func(s *StoreSink) { s.prefix = p } }

// WithMaxPending bounds the distinct events waiting to be written (n >= 1);
// a new event beyond it is dropped and counted (StoreStats.Dropped), while a
// newer version of a pending one always replaces it. Default
// DefaultMaxPending.
func WithMaxPending(n int) StoreOption {
	return func(s *StoreSink) {
		if n < 1 {
			panic(fmt.Sprintf("events: WithMaxPending(%d): want >= 1", n))
		}
		s.maxPending = n
	}
}

// WithRetry sets the clock and the interval Run waits after a failed write
// (d > 0). Default: the real clock and DefaultRetryInterval.
func WithRetry(c clock.Clock, d time.Duration) StoreOption {
	return func(s *StoreSink) {
		if c == nil || d <= 0 {
			panic(fmt.Sprintf("events: WithRetry(%v, %v): want a clock and d > 0", c, d))
		}
		s.clock, s.retry = c, d
	}
}

// StoreStats counts a StoreSink's writes.
type StoreStats struct {
	// Written counts events written (or found already up to date).
	Written uint64
	// Failed counts failed writes; the event is kept pending and retried.
	Failed uint64
	// Dropped counts events dropped because WithMaxPending was reached.
	Dropped uint64
	// Pending is how many events wait to be written now.
	Pending int
}

// StoreSink writes events to a store: any informer.Store[string, Event]
// (memstore, etcdstore with a JSON codec, pgstore), under the key
// <prefix><event key>/<event ID>, one record per event whose Count moves.
// Write only queues the event's latest version, so a reconcile never waits
// on store I/O; Run writes what is queued, coalescing the versions of one
// event into one write. Each write is informer.CreateOrUpdate, keeping the
// stored version if it is newer (another writer got further), so a count
// never moves back. Create one with NewStoreSink; it is safe for concurrent
// use.
type StoreSink struct {
	rw         informer.ReadWriter[string, Event]
	prefix     string
	maxPending int
	clock      clock.Clock
	retry      time.Duration

	mu sync.Mutex
	// pending maps a store key to the latest version to write there;
	// guarded by mu.
	pending map[string]Event
	// wake has room for one signal: Run flushes after it.
	wake chan struct{}

	written, failed, dropped atomic.Uint64
}

// NewStoreSink returns a sink writing to rw. Start its Run (a Manager's
// AddFunc suits it) for the events to reach the store. It panics on a nil
// rw or a bad option.
func NewStoreSink(rw informer.ReadWriter[string, Event], opts ...StoreOption) *StoreSink {
	if rw == nil {
		panic("events: NewStoreSink(nil)")
	}
	s := &StoreSink{rw: rw, prefix: DefaultStorePrefix, maxPending: DefaultMaxPending,
		clock: clock.RealClock{}, retry: DefaultRetryInterval,
		pending: make(map[string]Event), wake: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// StoreKey returns the store key the sink writes e under.
func (s *StoreSink) StoreKey(e Event) string { return s.prefix + e.Key + "/" + e.ID }

// Write queues e to be written, replacing a pending older version of it.
// It never blocks.
func (s *StoreSink) Write(_ context.Context, e Event) {
	if !s.put(s.StoreKey(e), e, false) {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default: // a flush is due already
	}
}

// put adds e as key's pending version unless a newer one is pending, and
// reports whether anything is pending for key. A retry (failed write) never
// replaces a pending version: that one is newer or equal.
func (s *StoreSink) put(key string, e Event, retry bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.pending[key]
	switch {
	case ok && (retry || old.newer(e)):
	case !ok && len(s.pending) >= s.maxPending:
		s.dropped.Add(1)
		return false
	default:
		s.pending[key] = e
	}
	return true
}

// Run writes queued events until ctx is done, then returns nil. After a
// failed write it waits the retry interval before trying again. Events
// still pending when it returns stay queued: Flush with a fresh context
// writes them.
func (s *StoreSink) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		if err := s.Flush(ctx); err == nil || ctx.Err() != nil {
			continue
		}
		t := s.clock.NewTimer(s.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Flush writes every event pending when it is called, and returns an error
// if any write failed (the first one's, with how many failed); failed
// events stay pending. A done ctx fails the writes not yet made, which stay
// pending too.
func (s *StoreSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	batch := s.pending
	s.pending = make(map[string]Event, len(batch))
	s.mu.Unlock()
	var first error
	nfailed := 0
	for key, e := range batch {
		_, _, err := informer.CreateOrUpdate(ctx, s.rw, key, func(v *Event) error {
			*v = merge(*v, e)
			return nil
		})
		if err != nil {
			s.failed.Add(1)
			s.put(key, e, true)
			if first == nil {
				first = err
			}
			nfailed++
			continue
		}
		s.written.Add(1)
	}
	if first != nil {
		return fmt.Errorf("events: %d of %d event writes failed, first: %w", nfailed, len(batch), first)
	}
	return nil
}

// Stats returns the sink's counters and how many events are pending.
func (s *StoreSink) Stats() StoreStats {
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	return StoreStats{Written: s.written.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load(), Pending: n}
}

// merge returns what to store for e given the stored version (zero if the
// key is new): the newer of the two, with the earlier First.
func merge(stored, e Event) Event {
	if stored.ID == "" {
		return e
	}
	out := e
	if stored.newer(e) {
		out = stored
	}
	if !stored.First.IsZero() && stored.First.Before(out.First) {
		out.First = stored.First
	}
	return out
}
