package leader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
