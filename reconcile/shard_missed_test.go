package reconcile_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

// A key that changed while its bucket had no owner (its owner's leases
// lapsed, no one had taken the bucket yet) is queued by the new owner
// before the bulk of the moved bucket's keys, which go in at low
// priority: it is the first of its bucket that the new owner reconciles,
// not somewhere among the dozens of keys that moved with it.
func TestAKeyChangedWhileItsBucketHadNoOwnerShouldBeReconciledBeforeTheBulkOfTheMovedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 600
		store := storeWithKeys(keys)
		locks := memlock.NewLocks()
		cut := &shardtest.Cuttable{Backend: locks}
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", cut, store, log, time.Millisecond)
		b := startShardedReplica(t, "b", locks, store, log, 20*time.Millisecond)
		settled(t, a, b)
		time.Sleep(5 * time.Second) // every key reconciled by its owner
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		key := ""
		for i := keys - 1; key == ""; i-- {
			if k := fmt.Sprintf("key-%03d", i); owners[shard.BucketOf(k, shardBuckets)] == "a" {
				key = k
			}
		}
		seen := len(log.all())

		cut.Cut()                                      // a's leases lapse; b takes its buckets after LeaseDuration
		time.Sleep(bubbleRenew + 100*time.Millisecond) // a has stopped, b has not taken over
		store.Put(key, 1000)
		for deadline := time.Now().Add(time.Minute); len(b.s.Status().Held) < shardBuckets; time.Sleep(bubbleRetry) {
			require.True(t, time.Now().Before(deadline), "b takes every bucket")
		}
		time.Sleep(20 * time.Second) // b reconciles every moved key
		// Rank among b's reconciles of keys of the key's bucket: the other
		// moved buckets are acquired at jittered times.
		bucket := shard.BucketOf(key, shardBuckets)
		rank, moved := -1, 0
		for _, r := range log.all()[seen:] {
			if r.replica != "b" || r.bucket.ID != bucket {
				continue
			}
			if r.key == key && rank < 0 {
				rank = moved
			}
			moved++
		}
		require.GreaterOrEqual(t, rank, 0, "b reconciled %s", key)
		t.Logf("b reconciled %s as key %d of the %d of its bucket", key, rank, moved)
		assert.Less(t, rank, 4, "the changed key goes before the bulk of its bucket")
		b.stop(t)
		cut.Restore()
		a.stop(t)
	})
}
