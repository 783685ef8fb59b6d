package etcdstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/leader/shard"
)

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
	s := etcdstore.NewBuckets[item](etcdClient(t), uniquePrefix(t), 8)
	sourcetest.RunBucketed(t, sourcetest.BucketSuite[item]{Source: s, Store: s, BucketOf: s.BucketOf, Buckets: 8,
		Value: func(i int) item { return item{N: i} }})
}
