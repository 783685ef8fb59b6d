package etcd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcd"
	"github.com/converge-go/converge/leader/locktest"
)

func TestLockShouldSatisfyTheLockContract(t *testing.T) {
	t.Parallel()
	locktest.Run(t, func(t *testing.T) leader.Lock { return etcd.NewLock(newClient(t), uniqueKey(t)) })
}

func TestRecordShouldBeStoredAsJSONWithTheModRevisionAsVersion(t *testing.T) {
	t.Parallel()
	cli := newClient(t)
	key := uniqueKey(t)
	l := etcd.NewLock(cli, key)
	assert.Contains(t, l.Describe(), key)
	assert.Contains(t, l.Describe(), cli.Endpoints()[0])

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stored, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a", Term: 3, LeaseDuration: time.Second, AcquireTime: at, RenewTime: at, Version: 99})
	require.NoError(t, err)
	raw, err := cli.Get(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	assert.Equal(t, raw.Kvs[0].ModRevision, stored.Version, "the caller's Version is ignored")
	assert.JSONEq(t, `{"holderIdentity":"a","term":3,"leaseDurationNanos":1000000000,
		"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:05Z"}`, string(raw.Kvs[0].Value))

	existing, err := l.Create(t.Context(), leader.Record{HolderIdentity: "b"})
	require.ErrorIs(t, err, leader.ErrConflict)
	assert.Equal(t, stored, existing, "a conflicting Create returns the existing record")
	assert.Contains(t, err.Error(), `"a"`)
}

func TestUpdateShouldNeverCreateTheKey(t *testing.T) {
	t.Parallel()
	cli := newClient(t)
	key := uniqueKey(t)
	l := etcd.NewLock(cli, key)
	_, err := l.Update(t.Context(), leader.Record{}, leader.Record{HolderIdentity: "a"})
	require.ErrorIs(t, err, leader.ErrConflict, "Version 0 must not match a missing key's ModRevision")
	_, err = l.Get(t.Context())
	require.ErrorIs(t, err, leader.ErrNotFound)

	v1, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a"})
	require.NoError(t, err)
	_, err = cli.Delete(t.Context(), key)
	require.NoError(t, err)
	_, err = l.Update(t.Context(), v1, leader.Record{HolderIdentity: "b"})
	require.ErrorIs(t, err, leader.ErrConflict, "the record was deleted")
	_, err = l.Get(t.Context())
	require.ErrorIs(t, err, leader.ErrNotFound)
}

func TestUpdateShouldFailOnADoneContextWithoutWriting(t *testing.T) {
	t.Parallel()
	l := etcd.NewLock(newClient(t), uniqueKey(t))
	v1, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = l.Update(ctx, v1, leader.Record{HolderIdentity: "b"})
	assert.ErrorIs(t, err, context.Canceled)
	got, err := l.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, v1, got)
}

// candidate is an Elector on its own etcd client, running until stop.
type candidate struct {
	e      *leader.Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	terms []leader.Term // terms it started leading, in order
}

func startCandidate(t *testing.T, key, id string) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{})}
	e, err := leader.New(etcd.NewLock(newClient(t), key), leader.Config{
		Identity:        id,
		LeaseDuration:   2 * time.Second,
		RenewDeadline:   1500 * time.Millisecond,
		RetryPeriod:     200 * time.Millisecond,
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context) {
			term, _ := leader.TermFromContext(ctx)
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
		_ = e.Run(ctx)
	}()
	t.Cleanup(c.stop) // before the client's Close, which was registered earlier
	return c
}

// stop cancels Run and waits for it to return (after releasing the lock).
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

func TestTwoElectorsShouldHaveOneLeaderAndHandOverOnRelease(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	a := startCandidate(t, key, "a")
	b := startCandidate(t, key, "b")

	require.Eventually(t, func() bool { return a.e.IsLeader() || b.e.IsLeader() },
		5*time.Second, 10*time.Millisecond, "someone leads")
	// For more than a lease duration (renewals keep it), exactly one leads.
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.NotEqual(t, a.e.IsLeader(), b.e.IsLeader(), "exactly one leader at any time")
	}
	first, other := a, b
	if b.e.IsLeader() {
		first, other = b, a
	}
	firstTerm := first.lastTerm()
	require.NotZero(t, firstTerm)
	require.Equal(t, first.e.Leader(), other.e.Leader(), "both see the same holder")

	first.stop() // ReleaseOnCancel: writes an empty holder before returning
	released := time.Now()
	require.Eventually(t, other.e.IsLeader, 1500*time.Millisecond, 5*time.Millisecond,
		"the other takes over within a retry period (200ms, jittered to 240ms) plus margin, not a lease duration")
	took := time.Since(released)
	t.Logf("take-over after release: %v", took)
	assert.Less(t, took, time.Second)
	assert.False(t, first.e.IsLeader())
	assert.Greater(t, other.lastTerm(), firstTerm, "the new term is higher")

	other.stop()
	rec, err := etcd.NewLock(newClient(t), key).Get(t.Context())
	require.NoError(t, err)
	assert.Empty(t, rec.HolderIdentity, "released again")
	assert.Equal(t, other.lastTerm(), rec.Term)
}
