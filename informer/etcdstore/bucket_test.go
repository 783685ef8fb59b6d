package etcdstore_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/leader/shard"
)

func sortedKeys(entries []informer.Entry[string, item]) []string {
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}

func TestBucketsLayOutEachKeyUnderItsBucket(t *testing.T) {
	client := etcdClient(t)
	prefix := uniquePrefix(t)
	s := etcdstore.NewBuckets[item](client, prefix, 64)
	require.Equal(t, 1, shard.BucketOf("default/widget-1", 64))
	_, err := s.Create(t.Context(), "default/widget-1", item{N: 1})
	require.NoError(t, err)
	resp, err := client.Get(t.Context(), prefix+"1/default/widget-1") // BucketOf = 1 (hash_test.go)
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1, "the documented layout: <prefix><bucket>/<key>")

	_, err = client.Put(t.Context(), prefix+"2/default/widget-1", `{"n":2}`) // the wrong bucket
	require.NoError(t, err)
	entries, _, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []informer.Entry[string, item]{{Key: "default/widget-1", Value: item{N: 1}}}, entries,
		"a key outside the layout is skipped")
}

func TestABucketedInformerOverEtcdCachesOnlyTheBucketsItHolds(t *testing.T) {
	const buckets = 8
	client := etcdClient(t)
	s := etcdstore.NewBuckets[item](client, uniquePrefix(t), buckets)
	byBucket := map[int][]string{}
	for i := range 64 {
		k := "k" + strconv.Itoa(i)
		_, err := s.Create(t.Context(), k, item{N: i})
		require.NoError(t, err)
		byBucket[s.BucketOf(k)] = append(byBucket[s.BucketOf(k)], k)
	}
	inf := informer.New("etcd", informer.Bucketed[string, item](s, s.BucketOf))
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
		_, rev, _, err := s.Get(wctx, k)
		require.NoError(t, err)
		rev, err = s.Update(wctx, k, item{N: -1}, rev)
		require.NoError(t, err)
		return rev
	}
	bump(held)
	require.NoError(t, inf.WaitForRevision(wctx, bump(other)))
	v, _ := inf.Get(held)
	assert.Equal(t, -1, v.N, "a held bucket's change is followed")
	_, ok := inf.Get(other)
	assert.False(t, ok, "another bucket's change is not cached")

	inf.ReleaseBucket(3)
	assert.Equal(t, slices.Sorted(slices.Values(byBucket[5])), sortedKeys(inf.List()))
}
