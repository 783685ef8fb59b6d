package reconcile_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/leasetest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
)

// The tests in this file run in a synctest bubble: every clock (the
// elector's, the controllers', the Manager's) is the bubble's fake time,
// which moves only when every goroutine is blocked, so the timings below
// are exact.
const (
	bubbleLease = 2 * time.Second
	bubbleRenew = 1400 * time.Millisecond
	bubbleRetry = 200 * time.Millisecond
	// hold is how long each reconcile takes: far longer than a lease, far
	// shorter than the shutdown grace (30s by default).
	hold = 5 * bubbleLease
)

// leasedReplica is a Manager with leader election on a shared lock, whose
// one controller reconciles a shared store with a reconciler that holds
// each reconcile for hold and records it in a journal.
type leasedReplica struct {
	m      *reconcile.Manager
	cancel context.CancelFunc
	done   chan error
}

func startLeasedReplica(t *testing.T, id string, lock leader.Lock, store *memstore.Store[string, int], j *leasetest.Journal) *leasedReplica {
	t.Helper()
	inf := must.Do(informer.New("ints", store))
	c, err := reconcile.New("ints", j.Holding(id, hold), reconcile.For(inf), quiet)
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Lock: lock, Logger: quietLogger, Leader: leader.Config{
		Identity: id, LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry, ReleaseOnCancel: true,
	}})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	r := &leasedReplica{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	return r
}

// stop cancels the replica's Run and returns its result.
func (r *leasedReplica) stop() error {
	r.cancel()
	return <-r.done
}

// reconcilingLeader starts replica "a" on a fresh lock, over a store with
// one key, and returns once a leads and reconciles the key.
func reconcilingLeader(t *testing.T) (*memlock.Lock, *memstore.Store[string, int], *leasetest.Journal, *leasedReplica) {
	t.Helper()
	store := must.Do(memstore.New[string, int]())
	store.Put("k", 1)
	lock := memlock.NewLock()
	j := leasetest.New()
	a := startLeasedReplica(t, "a", lock, store, j)
	require.True(t, j.Await(time.Minute, started("a")), "a leads and reconciles")
	return lock, store, j, a
}

func started(replica string) func(done, running []leasetest.Interval) bool {
	return func(done, running []leasetest.Interval) bool {
		for _, iv := range append(done, running...) {
			if iv.Replica == replica {
				return true
			}
		}
		return false
	}
}

func TestAGracefulStopUnderALockShouldKeepTheNextLeaderWaitingUntilItsReconcilesHaveEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lock, store, j, a := reconcilingLeader(t)
		b := startLeasedReplica(t, "b", lock, store, j)
		time.Sleep(bubbleLease) // b campaigns, and sees a renew
		require.Empty(t, j.Done(), "a's reconcile is still in progress")

		stopping := time.Now()
		require.NoError(t, a.stop())
		aReturned := time.Now()
		require.True(t, j.Await(time.Minute, started("b")), "b takes over")
		require.NoError(t, b.stop())

		done := j.Done()
		assert.Empty(t, leasetest.Overlaps(done, j.Running()), "terms overlap")
		require.Len(t, done, 2)
		first, second := done[0], done[1]
		require.Equal(t, "a", first.Replica)
		assert.NoError(t, first.Cause, "a's reconcile ran to its end, within the grace")
		assert.Equal(t, first.Start.Add(hold), first.End)
		assert.True(t, first.End.After(stopping), "a's reconcile spanned the stop")
		assert.Equal(t, "b", second.Replica)
		assert.Greater(t, second.Term, first.Term)
		assert.LessOrEqual(t, second.Start.Sub(aReturned), time.Duration(leader.DefaultJitterFactor*float64(bubbleRetry)),
			"b took over within a retry period of a's release")
	})
}

func TestLosingTheLeaseDuringTheShutdownGraceShouldCancelTheReconcilesInProgressAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lock, _, j, a := reconcilingLeader(t)

		a.cancel() // a graceful stop: a's reconcile gets the grace
		time.Sleep(bubbleLease)
		synctest.Wait() // a renewal due at this instant has finished: the theft does not race it
		require.Empty(t, j.Done(), "a's reconcile is still in its grace")
		stolen := steal(t, lock, "thief")
		require.True(t, j.Await(time.Minute, func(done, _ []leasetest.Interval) bool { return len(done) == 1 }))
		ended := time.Now()
		assert.NoError(t, <-a.done)

		iv := j.Done()[0]
		assert.ErrorIs(t, iv.Cause, context.Canceled, "the reconcile was cancelled, not finished")
		assert.LessOrEqual(t, ended.Sub(iv.Start), bubbleLease+bubbleRetry,
			"cancelled at a's first renewal after the theft, long before its end or the grace's")
		rec, err := lock.Get(context.Background())
		require.NoError(t, err)
		assert.Equal(t, stolen, rec, "a released nothing it did not hold")
	})
}
