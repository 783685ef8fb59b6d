package shard_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
)

func TestThreeReplicasShouldHoldEveryBucketOnceAsAssigned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
		took := cl.until(3*lease, func() bool { return cl.balanced(a, b, c) })
		t.Logf("balanced %v after start", took)
		cl.advance(2 * lease) // and stays so
		assert.True(t, cl.balanced(a, b, c))

		st := a.s.Status()
		assert.Equal(t, []string{"a", "b", "c"}, st.Members)
		assert.Empty(t, st.Suspects)
		assert.Empty(t, st.Campaigning)
		assert.Empty(t, st.Releasing)
		want := shard.Assign([]string{"a", "b", "c"}, buckets)
		for _, h := range st.Held {
			assert.Equal(t, "a", want[h.ID])
			assert.NotZero(t, h.Epoch)
		}
		assert.NoError(t, a.s.Check())
		for _, r := range []*replica{a, b, c} {
			cl.stop(r)
		}
		assert.Empty(t, cl.holders(), "a graceful stop gives every bucket up")
	})
}

func TestAJoiningReplicaShouldTakeItsShareAfterTheOldOwnersDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		cl.drain = 3 * time.Second
		a := cl.start("a")
		cl.until(lease, func() bool { return len(cl.holders()) == buckets })
		b := cl.start("b")
		sawReleasing := false
		took := cl.until(3*lease, func() bool {
			sawReleasing = sawReleasing || len(a.s.Status().Releasing) > 0
			return cl.balanced(a, b)
		})
		// b lists at once; a sees b within a ListPeriod, drains, releases;
		// b, campaigning, takes each bucket at its next retry.
		t.Logf("rebalanced %v after the join", took)
		assert.LessOrEqual(t, took, retry+cl.drain+retry+2*tick)
		assert.True(t, sawReleasing, "a reported the buckets it was giving up")
		moved := cl.actsOf("b")
		for _, x := range moved {
			assert.Equal(t, leader.Term(2), x.b.Epoch, "a held it in epoch 1")
		}
		assert.Len(t, moved, countOwned(shard.Assign([]string{"a", "b"}, buckets), "b"), "only b's share moved, once each")
		cl.stop(a)
		cl.stop(b)
	})
}

func countOwned(owners []string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}

func TestAGracefulLeaveShouldHandItsBucketsOverWithinARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
		cl.until(3*lease, func() bool { return cl.balanced(a, b, c) })
		start := cl.clk.Now()
		cl.stop(c)
		cl.until(lease, func() bool { return cl.balanced(a, b) })
		took := cl.clk.Since(start)
		t.Logf("rebalanced %v after the leave began", took)
		assert.LessOrEqual(t, took, retry+retry+2*tick, "no lease expiry is waited for")
		cl.stop(a)
		cl.stop(b)
	})
}

// A replica cut off from the store (or killed) stops acting on its buckets
// by its renew deadline, and the others take them over only after their
// leases expired: never two holders at once (checked by cluster.begin on
// every acquisition).
func TestAPartitionedReplicasBucketsShouldMoveOnlyAfterItsLeasesExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
		cl.until(3*lease, func() bool { return cl.balanced(a, b, c) })
		cl.advance(retry / 2) // off the renewal grid
		cut := cl.clk.Now()
		c.backend.Cut()
		took := cl.until(3*lease, func() bool { return cl.balanced(a, b) })
		t.Logf("rebalanced %v after the partition", took)
		for _, x := range cl.actsOf("c") {
			assert.False(t, x.open)
			assert.LessOrEqual(t, x.end.Sub(cut), renew, "c stopped acting by its renew deadline")
		}
		// Suspicion starts the others' electors on c's buckets early: one
		// lease plus detection, not two leases.
		assert.Greater(t, took, lease-retry, "nobody takes a bucket before its lease can have expired")
		// S + P + L + R, S = SuspectAfter's default 2.5×retry: well under
		// the 2L that waiting for c's membership to expire first would take.
		suspect := retry * 5 / 2
		assert.LessOrEqual(t, took, suspect+retry+lease+retry+2*tick, "suspicion lets candidates time c's buckets before c expires")
		assert.Less(t, took, 2*lease)

		// Healed, c rejoins and gets its share back.
		c.backend.Restore()
		took = cl.until(3*lease, func() bool { return cl.balanced(a, b, c) })
		t.Logf("rebalanced %v after healing", took)
		cl.stop(a)
		cl.stop(b)
		cl.stop(c)
	})
}

func TestNewShouldRejectABadConfig(t *testing.T) {
	locks := memlock.NewLocks()
	for name, cfg := range map[string]shard.Config{
		"no name":            {Identity: "a"},
		"no identity":        {Name: "x"},
		"slash in identity":  {Name: "x", Identity: "a/b"},
		"negative buckets":   {Name: "x", Identity: "a", Buckets: -1},
		"suspect too late":   {Name: "x", Identity: "a", SuspectAfter: 20 * time.Second},
		"suspect too early":  {Name: "x", Identity: "a", SuspectAfter: time.Second},
		"bad lease timings":  {Name: "x", Identity: "a", RenewDeadline: 20 * time.Second},
		"negative list time": {Name: "x", Identity: "a", ListPeriod: -time.Second},
	} {
		_, err := shard.New(locks, cfg)
		assert.ErrorIs(t, err, shard.ErrInvalidConfig, name)
	}
	_, err := shard.New(nil, shard.Config{Name: "x", Identity: "a"})
	assert.ErrorIs(t, err, shard.ErrInvalidConfig)
	s, err := shard.New(locks, shard.Config{Name: "x", Identity: "a"})
	require.NoError(t, err)
	assert.Equal(t, shard.DefaultBuckets, s.Buckets())
}

func TestRunShouldRefuseASecondCallAndAddAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "x", Identity: "a"})
		require.NoError(t, err)
		assert.Error(t, s.Add(nil))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		assert.Error(t, s.Run(ctx))
		assert.Error(t, s.Add(shard.HandlerFunc(func(_, _ context.Context, _ shard.Bucket) {})))
		cancel()
		assert.NoError(t, <-done)
	})
}

// A paused process (SIGSTOP, a frozen VM) does nothing, its watchdog
// included, so its leases lapse while it still believes it holds them.
// The others take its buckets after the leases expired; when it resumes,
// its watchdog ends every lease it thought it held before any renewal can
// succeed, and a write it makes in between under its old epoch is refused
// by the fence, which the new holder has already raised. It then gets its
// share back, in new epochs.
func TestAPausedReplicasStaleWritesShouldBeFencedAndItsBucketsMoveBackAfterItResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a, b := cl.start("a"), cl.start("b")
		cl.until(3*lease, func() bool { return cl.balanced(a, b) })
		var held []shard.Bucket
		for _, x := range cl.actsOf("a") {
			if x.open {
				held = append(held, x.b)
			}
		}
		require.NotEmpty(t, held)

		cl.pause(a)
		cl.until(3*lease, func() bool {
			hs := cl.holders()
			for _, x := range held {
				if hs[x.ID] != "b" {
					return false
				}
			}
			return true
		})
		cl.advance(lease)
		wasHeld := func(x act) bool { return slices.Contains(held, x.b) }
		for _, x := range cl.actsOf("a") {
			if wasHeld(x) {
				assert.True(t, x.open, "paused, a has noticed nothing on %v", x.b)
			}
		}

		cl.resume(a)
		// The moment a runs again, before it can talk to the store, a
		// reconcile of its old epoch would write: the fence refuses it.
		for _, x := range held {
			assert.False(t, cl.fencedWrite(x), "a's write in %v is refused", x)
		}
		synctest.Wait()
		for _, x := range cl.actsOf("a") {
			if wasHeld(x) {
				assert.False(t, x.open, "a's watchdog ended its lease on %v at once", x.b)
				assert.True(t, x.overlapped, "b held %v while a was paused", x.b)
			}
		}
		cl.until(3*lease, func() bool { return cl.balanced(a, b) })
		for _, x := range cl.actsOf("a") {
			if x.open {
				assert.Greater(t, x.b.Epoch, leader.Term(2), "a's bucket %d back in a new epoch", x.b.ID)
			}
		}
		cl.stop(a)
		cl.stop(b)
	})
}

func TestASecondRunShouldFailAtOnceWithErrRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "a"})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		err = s.Run(ctx)
		require.ErrorIs(t, err, shard.ErrRunTwice)
		assert.Contains(t, err.Error(), "ManagerOptions.Shards", "the error names the one way to run it")
		cancel()
		require.NoError(t, <-done)
	})
}

func TestMoveWithinShouldBeTheBoundOfAStoppedOwnersMove(t *testing.T) {
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "a", LeaseDuration: 2 * time.Second,
		RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond, JitterFactor: 1.5})
	require.NoError(t, err)
	// SuspectAfter (2.5×RetryPeriod) + ListPeriod (RetryPeriod) + LeaseDuration + RetryPeriod×JitterFactor.
	assert.Equal(t, 500*time.Millisecond+200*time.Millisecond+2*time.Second+300*time.Millisecond, s.MoveWithin())
}
