package pgstore_test

import (
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/shard"
)

func TestTheServersBucketOfAKeyIsShardBucketOf(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	b := must.Do(pgstore.NewBuckets(must.Do(pgstore.New[item](db, newColl())), 64))
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
	pool := newPool(t)
	store := must.Do(pgstore.New[item](newDB(t, pool, newSchema(t, pool)), newColl()))
	src := must.Do(pgstore.NewBuckets(store, 8))
	require.NoError(t, src.SetupBuckets(t.Context()))
	sourcetest.RunBucketed(t, sourcetest.BucketSuite[item]{Source: src, Store: store, Buckets: 8,
		BucketOf: func(k string) int { return shard.BucketOf(k, 8) },
		Value:    func(i int) item { return item{N: i} }})
}
