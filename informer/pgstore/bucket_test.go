package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/leader/shard"
)

func TestTheServersBucketOfAKeyIsShardBucketOf(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	b := pgstore.NewBuckets(pgstore.New[item](db, newColl()), 64)
	require.NoError(t, b.SetupBuckets(t.Context()))

	keys := []string{"", "a", "foobar", "default/widget-1", "ünïcode", "日本語/キー", "\u00ff\u0101"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		k := make([]byte, rng.IntN(40))
		for i := range k {
			k[i] = byte(' ' + rng.IntN(95))
		}
		keys = append(keys, string(k))
	}
	fn := pgx.Identifier{schema, "fnv1a64_bucket"}.Sanitize()
	for _, n := range []int{1, 2, 7, 64, 1000, 1 << 20, 2147483647} {
		for _, k := range keys {
			var got int
			require.NoError(t, pool.QueryRow(t.Context(), "SELECT "+fn+"($1, $2)", k, n).Scan(&got))
			require.Equal(t, shard.BucketOf(k, n), got, "bucket of %q among %d", k, n)
		}
	}
}

func TestABucketedInformerOverPostgreSQLCachesOnlyTheBucketsItHolds(t *testing.T) {
	const buckets = 8
	pool := newPool(t)
	schema := newSchema(t, pool)
	store := pgstore.New[item](newDB(t, pool, schema), newColl())
	src := pgstore.NewBuckets(store, buckets)
	require.NoError(t, src.SetupBuckets(t.Context()))
	byBucket := map[int][]string{}
	for i := range 64 {
		k := fmt.Sprintf("k%d", i)
		_, err := store.Create(t.Context(), k, item{N: i})
		require.NoError(t, err)
		byBucket[shard.BucketOf(k, buckets)] = append(byBucket[shard.BucketOf(k, buckets)], k)
	}
	inf := informer.New("pg", informer.Bucketed[string, item](src, func(k string) int { return shard.BucketOf(k, buckets) }),
		informer.WithLogger(quiet))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = inf.Run(ctx) })
	wctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	require.NoError(t, inf.WaitForCache(wctx))
	assert.Zero(t, inf.Len())

	require.NoError(t, inf.AcquireBucket(wctx, 3))
	require.NoError(t, inf.AcquireBucket(wctx, 5))
	want := slices.Sorted(slices.Values(append(slices.Clone(byBucket[3]), byBucket[5]...)))
	assert.Equal(t, want, sortedKeys(inf.List()))

	held, other := byBucket[3][0], byBucket[4][0]
	bump := func(k string) informer.Revision {
		_, rev, _, err := store.Get(wctx, k)
		require.NoError(t, err)
		rev, err = store.Update(wctx, k, item{N: -1}, rev)
		require.NoError(t, err)
		return rev
	}
	bump(held)
	last := bump(other)
	require.NoError(t, inf.WaitForRevision(wctx, last))
	v, _ := inf.Get(held)
	assert.Equal(t, -1, v.N, "a held bucket's change is followed")
	_, ok := inf.Get(other)
	assert.False(t, ok, "another bucket's change is not cached")

	inf.ReleaseBucket(3)
	assert.Equal(t, slices.Sorted(slices.Values(byBucket[5])), sortedKeys(inf.List()))
}

func sortedKeys(entries []informer.Entry[string, item]) []string {
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}
