package reconcile_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
)

func shardBucketOf(k string) int { return shard.BucketOf(k, shardBuckets) }

// With a bucketed informer each replica caches only the keys of the
// buckets it holds, and a joiner loads a moved bucket's keys before it
// reconciles them, each once.
func TestABucketedInformerShouldCacheOnlyTheReplicasBucketsAndReconcileEveryMovedKeyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 200
		store := storeWithKeys(keys)
		locks := memlock.NewLocks()
		log := &shardLog{t: t}
		src := func() informer.Source[string, int] {
			return informer.Bucketed[string, int](memstore.WithBuckets(store, shardBucketOf), shardBucketOf)
		}
		a := startReplicaOver(t, "a", locks, log, 10*time.Millisecond, src())
		settled(t, a)
		time.Sleep(5 * time.Second)
		assert.Equal(t, keys, a.inf.Len(), "a alone holds every bucket")
		b := startReplicaOver(t, "b", locks, log, 10*time.Millisecond, src())
		settled(t, a, b)
		time.Sleep(5 * time.Second)

		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		held := map[string]int{}
		for i := range keys {
			key := fmt.Sprintf("key-%03d", i)
			owner := owners[shardBucketOf(key)]
			held[owner]++
			for _, r := range []*shardedReplica{a, b} {
				_, cached := r.inf.Get(key)
				assert.Equal(t, r.id == owner, cached, "%s cached on %s (owner %s)", key, r.id, owner)
			}
			if owner == "b" {
				assert.Len(t, log.of(key, "b"), 1, "%s reconciled once by its new owner", key)
			}
		}
		assert.Equal(t, held["a"], a.inf.Len())
		assert.Equal(t, held["b"], b.inf.Len())
		assert.NotZero(t, held["b"])

		store.Put("key-007", -1) // a change reaches its owner's cache only
		time.Sleep(time.Second)
		owner := map[string]*shardedReplica{"a": a, "b": b}[owners[shardBucketOf("key-007")]]
		v, _ := owner.inf.Get("key-007")
		assert.Equal(t, -1, v)
		a.stop(t)
		b.stop(t)
	})
}
