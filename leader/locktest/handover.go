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
// It checks that exactly one leads for longer than a lease, and that when
// the leader is cancelled the other takes over within a retry period (plus
// a margin), not a lease duration, with a higher term; and that the record
// is released at the end.
func Handover(t *testing.T, sameRecord func(t *testing.T) leader.Lock) {
	a, b := startCandidate(t, sameRecord(t), "a"), startCandidate(t, sameRecord(t), "b")

	require.Eventually(t, func() bool { return a.e.IsLeader() || b.e.IsLeader() },
		5*time.Second, 10*time.Millisecond, "someone leads")
	for end := time.Now().Add(handoverLease + handoverLease/4); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.NotEqual(t, a.e.IsLeader(), b.e.IsLeader(), "exactly one leader at any time")
	}
	first, other := a, b
	if b.e.IsLeader() {
		first, other = b, a
	}
	firstTerm := first.lastTerm()
	require.NotZero(t, firstTerm)
	require.Equal(t, first.e.Leader(), other.e.Leader(), "both see the same holder")

	first.stop() // ReleaseOnCancel: the release is written before Run returns
	released := time.Now()
	require.Eventually(t, other.e.IsLeader, 2*time.Second, 5*time.Millisecond)
	took := time.Since(released)
	t.Logf("take-over after release: %v", took)
	assert.Less(t, took, time.Duration(leader.DefaultJitterFactor*float64(handoverRetry))+500*time.Millisecond,
		"within a retry period plus margin, not a lease duration")
	assert.False(t, first.e.IsLeader())
	assert.Greater(t, other.lastTerm(), firstTerm, "the new term is higher")

	other.stop()
	rec, err := sameRecord(t).Get(t.Context())
	require.NoError(t, err)
	assert.Empty(t, rec.HolderIdentity, "released again")
	assert.Equal(t, other.lastTerm(), rec.Term)
}

// candidate is an Elector running until stop, recording its terms.
type candidate struct {
	e      *leader.Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	terms []leader.Term // terms it started leading, in order
}

func startCandidate(t *testing.T, l leader.Lock, id string) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{})}
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
