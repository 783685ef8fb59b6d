package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// takeAllBuckets runs one replica of a controller that watches an
// informer of n keys through watch, sharded over 64 buckets, until it
// holds every bucket and has reconciled what it queued; it returns how
// many reconciles ran.
func takeAllBuckets(t *testing.T, n int, watch func(*informer.Informer[string, int]) reconcile.Option) (reconciles int64) {
	inf := must.Do(informer.New("items", storeWithKeys(n), informer.WithLogger(quietLogger)))
	s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "r1", Buckets: 64})
	require.NoError(t, err)
	var recs atomic.Int64
	c, err := reconcile.New("c", reconcile.Func(func(ctx context.Context, k string) (reconcile.Result, error) {
		recs.Add(1)
		return reconcile.Result{}, nil
	}), watch(inf), reconcile.WithShards(s), quiet)
	require.NoError(t, err)
	stop := runShardedManager(t, s, inf, c)
	defer stop()
	time.Sleep(time.Minute)
	synctest.Wait()
	require.Len(t, s.Status().Held, 64)
	return recs.Load()
}

// Taking a bucket costs that bucket's keys, not the whole cache: a replica
// that takes all 64 buckets runs the predicates once per key for the
// initial list and once per key when the key's bucket is acquired, not
// once per key and bucket.
func TestTakingABucketShouldRunThePredicatesOnlyOnThatBucketsKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		var preds atomic.Int64
		recs := takeAllBuckets(t, n, func(inf *informer.Informer[string, int]) reconcile.Option {
			return reconcile.For(inf, func(reconcile.Change[string, int]) bool { preds.Add(1); return true })
		})
		assert.LessOrEqual(t, preds.Load(), int64(2*n), "predicate calls for %d keys in 64 buckets", n)
		assert.GreaterOrEqual(t, recs, int64(n), "every key reconciled")
	})
}

// An informer watched through a key mapping (Watch) cannot be indexed by
// the controller's buckets, so it is scanned, but the buckets acquired
// while a scan runs share the next scan instead of one scan each: with a
// scan that takes longer than the acquisitions are spread (a large cache,
// here a slow mapper), taking 64 buckets at once costs two scans.
func TestTakingManyBucketsAtOnceShouldScanAMappedInformerFarFewerTimesThanBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		var maps atomic.Int64
		recs := takeAllBuckets(t, n, func(inf *informer.Informer[string, int]) reconcile.Option {
			return reconcile.Watch(inf, func(k string, _ int) []string {
				maps.Add(1)
				time.Sleep(time.Millisecond)
				return []string{k}
			})
		})
		t.Logf("mapper calls for %d keys in 64 buckets: %d", n, maps.Load())
		assert.LessOrEqual(t, maps.Load(), int64(3*n), "the initial list and two scans")
		assert.GreaterOrEqual(t, recs, int64(n), "every key reconciled")
	})
}

// The bucket index calls the controller's key function inside the
// informer: a key function that panics on a key must not make the
// informer skip that key's change for everyone else.
func TestAKeyFunctionThatPanicsShouldNotKeepAKeyOutOfTheInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(10)
		inf := must.Do(informer.New("items", store, informer.WithLogger(quietLogger)))
		s, err := shard.New(memlock.NewLocks(), shard.Config{Name: "t", Identity: "r1", Buckets: 4})
		require.NoError(t, err)
		keyOf := func(k string) string {
			if k == "bad" {
				panic("no bucket for bad")
			}
			return k
		}
		c, err := reconcile.New("c", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}), reconcile.For(inf), reconcile.WithShards(s), reconcile.WithShardKey(keyOf), quiet)
		require.NoError(t, err)
		stop := runShardedManager(t, s, inf, c)
		time.Sleep(time.Minute) // every bucket taken: the index exists
		store.Put("bad", 1)
		time.Sleep(time.Second)
		_, ok := inf.Get("bad")
		assert.True(t, ok, "the informer holds the key")
		stop()
	})
}

// runShardedManager runs a Manager of inf and c with s as its Shards, until
// the returned stop.
func runShardedManager(t *testing.T, s *shard.Sharder, inf reconcile.Cache, c reconcile.Runner) (stop func()) {
	t.Helper()
	mgr, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, mgr.AddInformer(inf))
	require.NoError(t, mgr.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}
