package reconcile_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// pausedClock is the real clock (the bubble's) whose Now can jump ahead of
// its timers: what a process resumed from SIGSTOP sees until the timers
// that fell due during the pause have fired.
type pausedClock struct {
	clock.RealClock
	ahead atomic.Int64
}

func (c *pausedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *pausedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// A reconcile starts on a bucket only while the bucket's lease is valid by
// the local clock: a process resumed from a pause longer than the renew
// deadline starts none on its old epochs, though its watchdog has not run
// yet; the bucket is then acquired again, at a new epoch, and the key
// reconciled under it.
func TestAReconcileShouldNotStartOnABucketWhoseLeaseIsPastItsRenewDeadlineByTheLocalClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(20)
		clk := &pausedClock{}
		s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "ints", Identity: "a", Buckets: shardBuckets,
			LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry, Clock: clk})
		require.NoError(t, err)
		inf := must.Do(informer.New("ints", store, informer.WithLogger(quietLogger)))
		log := &shardLog{t: t}
		c, err := reconcile.New("ints", log.reconciler("a", time.Millisecond), reconcile.For(inf),
			reconcile.WithShards(s), quiet)
		require.NoError(t, err)
		stop := runShardedManager(t, s, inf, c)
		for len(s.Status().Held) < shardBuckets {
			time.Sleep(bubbleRetry)
		}
		// Between two renewals (every bubbleRetry from the acquisitions
		// at 0): a renewal at the instant of the jump below would make the
		// lease valid again, rightly.
		time.Sleep(time.Second + bubbleRetry/2)
		const key = "key-007"
		before := log.of(key, "a")
		require.NotEmpty(t, before)
		oldEpoch := before[len(before)-1].bucket.Epoch

		clk.ahead.Store(int64(bubbleRenew)) // resumed: no renewal for RenewDeadline
		seen := len(log.all())
		store.Put(key, 1000)
		synctest.Wait() // the change is delivered and taken by a worker at once
		for _, r := range log.all()[seen:] {
			if r.key == key {
				assert.NotEqual(t, oldEpoch, r.bucket.Epoch, "a reconcile started on an epoch whose lease is past its renew deadline")
			}
		}
		time.Sleep(2 * bubbleLease)
		after := log.of(key, "a")
		require.Greater(t, len(after), len(before), "the key is reconciled again once its bucket is acquired again")
		assert.Greater(t, after[len(after)-1].bucket.Epoch, oldEpoch)
		stop()
	})
}
