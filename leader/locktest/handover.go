package locktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
)

// Handover timings: short enough for a test, on the real clock, with the
// ratios of the defaults.
const (
	handoverLease = 2 * time.Second
	handoverRenew = 1500 * time.Millisecond
	handoverRetry = 200 * time.Millisecond
)

// Handover runs two electors with ReleaseOnCancel on the real clock, each on
// its own Lock from sameRecord, which must return a Lock over one shared
// record through a connection of its own (as another process would have).
//
// It checks safety soundly, whatever the machine's load: during a lease and
// a quarter it samples both electors' IsLeader, and fails only if both are
// true in a sample taken within LeaseDuration−RenewDeadline, which the
// safety argument forbids (a renewal stall may leave neither leading; that
// is allowed). Then liveness, with generous bounds: someone leads; when the
// leader is cancelled, the other takes over, from the record the first one
// released (not by waiting for its lease to expire), with a higher term;
// and the record is released at the end.
func Handover(t *testing.T, sameRecord func(t *testing.T) leader.Lock) {
	const generous = 10 * time.Second
	writes := &writeLog{}
	a := startCandidate(t, &recordingLock{Lock: sameRecord(t), log: writes, id: "a"}, "a")
	b := startCandidate(t, &recordingLock{Lock: sameRecord(t), log: writes, id: "b"}, "b")

	require.Eventually(t, func() bool { return a.e.IsLeader() || b.e.IsLeader() }, generous, 10*time.Millisecond, "someone leads")
	window := handoverLease - handoverRenew
	for end := time.Now().Add(handoverLease + handoverLease/4); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		before := time.Now()
		la, lb := a.e.IsLeader(), b.e.IsLeader()
		if took := time.Since(before); la && lb && took < window {
			require.Failf(t, "two leaders at once", "both electors lead in reads %v apart, less than LeaseDuration−RenewDeadline %v", took, window)
		}
	}

	// The leader, once its OnStartedLeading has recorded the record's term
	// (IsLeader turns true a moment before).
	reader := sameRecord(t)
	var first, other *candidate
	require.Eventually(t, func() bool {
		first, other = nil, nil
		switch {
		case a.e.IsLeader():
			first, other = a, b
		case b.e.IsLeader():
			first, other = b, a
		default:
			return false
		}
		rec, err := reader.Get(t.Context())
		return err == nil && rec.HolderIdentity == first.id && first.lastTerm() == rec.Term
	}, generous, 10*time.Millisecond, "someone leads, and has started its term")
	firstTerm := first.lastTerm()
	require.NotZero(t, firstTerm)
	require.Eventually(t, func() bool { return other.e.Leader() == first.id }, generous, 10*time.Millisecond, "the other sees the holder")

	stopAt := writes.len()
	first.stop() // ReleaseOnCancel: the release is written before Run returns
	released := time.Now()
	// IsLeader turns true as the term is acquired, a moment before
	// OnStartedLeading has run and recorded the term: wait for both.
	require.Eventually(t, func() bool { return other.e.IsLeader() && other.lastTerm() > firstTerm }, generous, 5*time.Millisecond,
		"the other takes over, in a higher term than %d", firstTerm)
	t.Logf("take-over after release: %v", time.Since(released))
	assert.False(t, first.e.IsLeader())
	acquired, ok := writes.find(func(w write) bool {
		return w.by == other.id && w.to.HolderIdentity == other.id && w.to.Term > firstTerm
	})
	require.True(t, ok, "the other's acquisition is logged")
	if acquired.seq < stopAt {
		// A renewal stall longer than the lease let the other take over
		// before the stop: there was nothing to release.
		t.Logf("the other took over term %d by expiry before the first was stopped", acquired.to.Term)
	} else {
		assert.Empty(t, acquired.from.HolderIdentity, "the other took over the released record, not an expired one: %+v", acquired)
	}

	other.stop()
	rec, err := reader.Get(t.Context())
	require.NoError(t, err)
	assert.Empty(t, rec.HolderIdentity, "released again")
	assert.Equal(t, other.lastTerm(), rec.Term)
}

// write is one successful Create or Update through a recordingLock.
type write struct {
	seq      int
	by       string        // the elector whose lock wrote
	from, to leader.Record // from is zero for a Create
}

// writeLog is the successful writes of electors, in the order they
// returned.
type writeLog struct {
	mu     sync.Mutex
	writes []write
}

func (l *writeLog) add(w write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.seq = len(l.writes)
	l.writes = append(l.writes, w)
}

func (l *writeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

func (l *writeLog) find(match func(write) bool) (write, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if match(w) {
			return w, true
		}
	}
	return write{}, false
}

// recordingLock logs the successful writes made through a Lock.
type recordingLock struct {
	leader.Lock
	log *writeLog
	id  string
}

func (l *recordingLock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	stored, err := l.Lock.Create(ctx, r)
	if err == nil {
		l.log.add(write{by: l.id, to: stored})
	}
	return stored, err
}

func (l *recordingLock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	stored, err := l.Lock.Update(ctx, old, r)
	if err == nil {
		l.log.add(write{by: l.id, from: old, to: stored})
	}
	return stored, err
}

// candidate is an Elector running until stop, recording its terms.
type candidate struct {
	id     string
	e      *leader.Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	terms []leader.Term // terms it started leading, in order
}

func startCandidate(t *testing.T, l leader.Lock, id string) *candidate {
	t.Helper()
	c := &candidate{id: id, done: make(chan struct{})}
	e, err := leader.New(l, leader.Config{
		Identity:        id,
		LeaseDuration:   handoverLease,
		RenewDeadline:   handoverRenew,
		RetryPeriod:     handoverRetry,
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context) {
			term, ok := leader.TermFromContext(ctx)
			assert.True(t, ok)
			c.mu.Lock()
			c.terms = append(c.terms, term)
			c.mu.Unlock()
			<-ctx.Done()
		},
	})
	require.NoError(t, err)
	c.e = e
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		assert.NoError(t, e.Run(ctx))
	}()
	// Registered after the caller's connection cleanups, so it runs first.
	t.Cleanup(c.stop)
	return c
}

// stop cancels Run and waits for it to return; calling it again is a no-op.
func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func (c *candidate) lastTerm() leader.Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.terms) == 0 {
		return 0
	}
	return c.terms[len(c.terms)-1]
}
