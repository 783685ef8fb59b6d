package leader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/leader"
)

// lateRenewalLock is a lock on which one renewal that its caller gave up
// on still commits: just before the first release, a write of the same
// holder and term lands, as a renewal whose client context was cancelled
// but whose request the store had already applied would.
type lateRenewalLock struct {
	leader.Lock
	landed atomic.Bool
}

func (l *lateRenewalLock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if r.HolderIdentity == "" && l.landed.CompareAndSwap(false, true) {
		cur, err := l.Lock.Get(ctx)
		if err == nil {
			late := cur
			late.RenewTime = late.RenewTime.Add(tick)
			_, err = l.Lock.Update(ctx, cur, late)
		}
		if err != nil {
			return leader.Record{}, err
		}
	}
	return l.Lock.Update(ctx, old, r)
}

func TestAReleaseThatMeetsALateRenewalOfItsOwnTermShouldBeRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		late := &lateRenewalLock{Lock: cl.lock}
		release := func(c *leader.Config) { c.ReleaseOnCancel = true }
		a := cl.start("a", release)
		a.lock.Lock = late // every write of a's goes through the late renewal
		b := cl.start("b", release)
		defer b.stop()
		cl.advance(3*time.Second+tick, nil)
		require.True(t, a.IsLeader())

		a.stop()
		require.True(t, late.landed.Load(), "the release met the late renewal")
		rec, err := cl.lock.Get(t.Context())
		require.NoError(t, err)
		assert.Empty(t, rec.HolderIdentity, "the release was retried and the lock is free")
		cl.until(retry, func() bool { return b.IsLeader() })
	})
}

// lateClock is a clock whose Now can jump ahead of its timers, as a
// process resumed from a pause sees: the time has passed, the timers that
// were due have not fired yet.
type lateClock struct {
	*clocktesting.FakeClock
	ahead atomic.Int64
}

func (c *lateClock) Now() time.Time                  { return c.FakeClock.Now().Add(time.Duration(c.ahead.Load())) }
func (c *lateClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func TestLeaseValidShouldBeFalseOnceTheRenewDeadlineHasPassedByTheLocalClockEvenBeforeTheWatchdogRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		clk := &lateClock{FakeClock: cl.clk}
		leaderCtx := make(chan context.Context, 1)
		a := cl.start("a", func(c *leader.Config) {
			c.Clock = clk
			c.OnStartedLeading = func(ctx context.Context) {
				leaderCtx <- ctx
				<-ctx.Done()
			}
		})
		defer a.stop()
		ctx := <-leaderCtx
		assert.False(t, leader.LeaseValid(context.Background()), "no term, no lease")
		cl.advance(renew, nil) // renewed every retry period
		require.True(t, leader.LeaseValid(ctx))

		clk.ahead.Store(int64(renew)) // the last renewal is now RenewDeadline old
		assert.False(t, leader.LeaseValid(ctx), "past the renew deadline by the local clock")
		assert.Error(t, ctx.Err(), "the term ended at once, before the watchdog's timer fired")
		assert.False(t, a.IsLeader())
		clk.ahead.Store(0)
		assert.False(t, leader.LeaseValid(ctx), "an ended lease stays invalid")
	})
}
