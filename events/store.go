package events

import (
	"context"
	"errors"
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
	// DefaultRetryInterval is how long Run waits after a failed write or
	// prune before it tries again.
	DefaultRetryInterval = time.Second
	// DefaultTTL is how long a stored event is kept after it was last
	// recorded, as kube-apiserver's --event-ttl.
	DefaultTTL = time.Hour
)

// StoreOption configures a StoreSink; NewStoreSink returns an error for a
// bad value.
type StoreOption func(*StoreSink)

// WithPrefix sets the prefix of the sink's store keys. The sink owns the
// records under it: it deletes those that retention says must go, also
// ones written by an earlier process. Default DefaultStorePrefix.
func WithPrefix(p string) StoreOption { return func(s *StoreSink) { s.prefix = p } }

// WithMaxPending bounds the distinct events waiting to be written (n >= 1);
// a new event beyond it is dropped and counted (StoreStats.Dropped), while a
// newer version of a pending one always replaces it. Default
// DefaultMaxPending.
func WithMaxPending(n int) StoreOption {
	return func(s *StoreSink) {
		if n < 1 {
			s.bad = append(s.bad, fmt.Errorf("WithMaxPending(%d): want >= 1", n))
			return
		}
		s.maxPending = n
	}
}

// WithStoreClock sets the clock that Run's waits and the TTL are measured
// on; k8s.io/utils/clock/testing's fake clocks make tests deterministic.
// The TTL compares it with the events' Last, stamped by the recorder's
// clock: give both the same clock. Default: the real clock.
func WithStoreClock(c clock.Clock) StoreOption {
	return func(s *StoreSink) {
		if c == nil {
			s.bad = append(s.bad, errors.New("WithStoreClock(nil)"))
			return
		}
		s.clock = c
	}
}

// WithRetryInterval sets how long Run waits after a failed write or prune
// before it tries again (d > 0). Default DefaultRetryInterval.
func WithRetryInterval(d time.Duration) StoreOption {
	return func(s *StoreSink) {
		if d <= 0 {
			s.bad = append(s.bad, fmt.Errorf("WithRetryInterval(%v): want > 0", d))
			return
		}
		s.retry = d
	}
}

// WithTTL sets how long a stored event is kept after it was last recorded
// (its Last), d >= 1s: Run prunes every tenth of d, so an event is deleted
// between d and 1.1 d after it was last recorded. Default DefaultTTL.
func WithTTL(d time.Duration) StoreOption {
	return func(s *StoreSink) {
		if d < time.Second {
			s.bad = append(s.bad, fmt.Errorf("WithTTL(%v): want >= 1s", d))
			return
		}
		s.ttl = d
	}
}

// WithMaxPerKey bounds the events the sink keeps stored for one key
// (n >= 1): beyond it, the least recently recorded are deleted. Default
// MaxEventsPerKey, what the recorder correlates per key.
func WithMaxPerKey(n int) StoreOption {
	return func(s *StoreSink) {
		if n < 1 {
			s.bad = append(s.bad, fmt.Errorf("WithMaxPerKey(%d): want >= 1", n))
			return
		}
		s.maxPerKey = n
	}
}

// StoreStats counts a StoreSink's writes and deletes.
type StoreStats struct {
	// Written counts events written (or found already up to date).
	Written uint64
	// Failed counts failed writes, deletes and lists of the store; an
	// event is kept pending and retried, a delete is tried again later.
	Failed uint64
	// Dropped counts events dropped because WithMaxPending was reached.
	Dropped uint64
	// Deleted counts stored events deleted by retention: expired, beyond
	// the per-key bound, or of a key that is gone.
	Deleted uint64
	// Pending is how many events wait to be written now.
	Pending int
	// Records is how many stored events the sink knows of now (see
	// StoreSink's retention).
	Records int
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
//
// # Retention
//
// As Kubernetes keeps events, the sink keeps the records under its prefix
// bounded, by deleting:
//
//   - those last recorded more than the TTL ago (WithTTL, default an
//     hour), at Prune, which Run calls every tenth of the TTL;
//   - beyond WithMaxPerKey records of one key, the least recently recorded,
//     at the Flush that wrote the newer ones;
//   - every record of a key that DeleteKey was called for, at the next
//     Flush. The sink cannot see a key's deletion by itself: the program
//     tells it, from the reconcile that finds its key gone or by adding
//     DeletionHandler to the informer of the keys.
//
// It finds the records it did not write (an earlier process's, another
// replica's) by listing the store: at Run's start and then once every TTL.
// Between two lists it knows the records it wrote itself, so a record
// another process writes meanwhile waits for the next list to be counted
// against the per-key bound or deleted with its key, and may outlive the
// TTL by up to a TTL. Before it deletes an expired record it reads it
// again, and keeps it if another writer recorded it again since; the
// other deletions compare nothing, and delete without reading.
type StoreSink struct {
	st         informer.Store[string, Event]
	prefix     string
	maxPending int
	clock      clock.Clock
	retry      time.Duration
	ttl        time.Duration
	maxPerKey  int
	// bad holds the options' errors, for NewStoreSink to return.
	bad []error

	mu sync.Mutex
	// pending maps a store key to the latest version to write there, and
	// gone holds the keys whose records DeleteKey asked to delete; guarded
	// by mu.
	pending map[string]Event
	gone    map[string]struct{}
	// wake has room for one signal: Run flushes after it.
	wake chan struct{}

	// io serialises Flush and Prune, which write and delete, and guards
	// the index of stored records.
	io      sync.Mutex
	records index

	written, failed, dropped, deleted atomic.Uint64
}

// NewStoreSink returns a sink writing to st. Start its Run (a Manager's
// AddFunc suits it) for the events to reach the store and for retention.
// It returns an error, naming the option, for a nil st, a nil option or a
// bad option value (a nil clock, fewer than 1 pending event or record per
// key, a retry interval not above 0, a TTL under a second).
func NewStoreSink(st informer.Store[string, Event], opts ...StoreOption) (*StoreSink, error) {
	if st == nil {
		return nil, errors.New("events.NewStoreSink: nil store")
	}
	s := &StoreSink{st: st, prefix: DefaultStorePrefix, maxPending: DefaultMaxPending,
		clock: clock.RealClock{}, retry: DefaultRetryInterval, ttl: DefaultTTL, maxPerKey: MaxEventsPerKey,
		pending: make(map[string]Event), wake: make(chan struct{}, 1)}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("events.NewStoreSink: option %d is nil", i)
		}
		o(s)
	}
	if err := errors.Join(s.bad...); err != nil {
		return nil, fmt.Errorf("events.NewStoreSink: %w", err)
	}
	s.bad = nil
	s.records.keys = make(map[string]map[string]time.Time)
	return s, nil
}

// StoreKey returns the store key the sink writes e under.
func (s *StoreSink) StoreKey(e Event) string { return s.prefix + e.Key + "/" + e.ID }

// Write queues e to be written, replacing a pending older version of it.
// It never blocks.
func (s *StoreSink) Write(_ context.Context, e Event) {
	if !s.put(s.StoreKey(e), e, false) {
		return
	}
	s.signal()
}

// signal wakes Run.
func (s *StoreSink) signal() {
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

// Run prunes (see Prune) at once and then every tenth of the TTL, and
// writes queued events, until ctx is done; then it returns nil. After a
// failed write or prune it waits the retry interval before trying again.
// Events still pending when it returns stay queued: Flush with a fresh
// context writes them.
func (s *StoreSink) Run(ctx context.Context) error {
	every := s.ttl / 10
	next := every
	if err := s.Prune(ctx); err != nil {
		next = s.retry
	}
	prune := s.clock.NewTimer(next)
	defer prune.Stop()
	var retry clock.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune.C():
			next := every
			if err := s.Prune(ctx); err != nil {
				next = s.retry
			}
			prune.Reset(next)
			continue
		case <-retryC:
			retry, retryC = nil, nil
		case <-s.wake:
			if retryC != nil {
				continue // the retry flushes what this wake announced
			}
		}
		if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
			retry = s.clock.NewTimer(s.retry)
			retryC = retry.C()
		}
	}
}

// Flush writes every event pending when it is called, deletes the oldest
// records of each key it wrote to beyond WithMaxPerKey, and the records of
// the keys given to DeleteKey. It returns an error if any write or delete
// failed (the first one's, with how many failed); failed events stay
// pending, failed deletes are tried again. A done ctx fails the writes not
// yet made, which stay pending too.
func (s *StoreSink) Flush(ctx context.Context) error {
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	batch := s.pending
	s.pending = make(map[string]Event, len(batch))
	s.mu.Unlock()
	var errs errCount
	touched := make(map[string]struct{})
	for key, e := range batch {
		var last time.Time
		_, _, err := informer.CreateOrUpdate(ctx, s.st, key, func(v *Event) error {
			*v = merge(*v, e)
			last = v.Last
			return nil
		})
		if err != nil {
			s.failed.Add(1)
			s.put(key, e, true)
			errs.add(err)
			continue
		}
		s.written.Add(1)
		s.records.set(e.Key, key, last)
		touched[e.Key] = struct{}{}
	}
	for k := range touched {
		s.capKey(ctx, k, &errs)
	}
	s.deleteGone(ctx, &errs)
	return errs.err()
}

// Stats returns the sink's counters, how many events are pending, and how
// many stored ones it knows of.
func (s *StoreSink) Stats() StoreStats {
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	return StoreStats{Written: s.written.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load(),
		Deleted: s.deleted.Load(), Pending: n, Records: int(s.records.count.Load())}
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

// errCount keeps the first of several errors and counts them.
type errCount struct {
	first error
	n     int
}

func (c *errCount) add(err error) {
	if c.first == nil {
		c.first = err
	}
	c.n++
}

// err returns nil, or the first error with how many failed.
func (c *errCount) err() error {
	if c.first == nil {
		return nil
	}
	return fmt.Errorf("events: %d store writes or deletes failed, first: %w", c.n, c.first)
}
