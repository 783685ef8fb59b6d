package etcdstore_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/shard"
)

func TestBucketsLayOutEachKeyUnderItsBucket(t *testing.T) {
	client := etcdClient(t)
	prefix := uniquePrefix(t)
	s := must.Do(etcdstore.NewBuckets[item](client, prefix, 64))
	require.Equal(t, 1, shard.BucketOf("default/widget-1", 64))
	created, err := s.Create(t.Context(), "default/widget-1", item{N: 1})
	require.NoError(t, err)
	resp, err := client.Get(t.Context(), prefix+"1/default/widget-1") // BucketOf = 1 (hash_test.go)
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1, "the documented layout: <prefix><bucket>/<key>")

	_, err = client.Put(t.Context(), prefix+"2/default/widget-1", `{"n":2}`) // the wrong bucket
	require.NoError(t, err)
	entries, _, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []informer.Entry[string, item]{{Key: "default/widget-1", Value: item{N: 1}, Revision: created}}, entries,
		"a key outside the layout is skipped")
}

func TestABucketedInformerOverEtcdCachesOnlyTheBucketsItHolds(t *testing.T) {
	s := must.Do(etcdstore.NewBuckets[item](etcdClient(t), uniquePrefix(t), 8))
	sourcetest.RunBucketed(t, sourcetest.BucketSuite[item]{Source: s, Store: s, BucketOf: s.BucketOf, Buckets: 8,
		Value: func(i int) item { return item{N: i} }})
}

func TestBucketsShouldReportAnUndecodableValueAsABadEntryAndPutOfItsKey(t *testing.T) {
	t.Parallel()
	client := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	s := must.Do(etcdstore.NewBuckets[item](client, prefix, 8))
	good, err := s.Create(ctx, "good", item{N: 1})
	require.NoError(t, err)
	r := startWatch(t, s, good)
	rawKey := strconv.Itoa(s.BucketOf("bad")) + "/bad"
	resp, err := client.Put(ctx, prefix+rawKey, "not json")
	require.NoError(t, err)
	bad := informer.Revision(resp.Header.Revision)
	after, err := s.Create(ctx, "after", item{N: 2})
	require.NoError(t, err)

	// checkBad checks that err is the DecodeError of the bad value.
	checkBad := func(err error) {
		t.Helper()
		var decodeErr *etcdstore.DecodeError
		if assert.ErrorAs(t, err, &decodeErr) {
			assert.Equal(t, etcdstore.DecodeError{Prefix: prefix, Key: rawKey, Revision: bad, Err: decodeErr.Err}, *decodeErr,
				"it names the etcd key to fix")
		}
	}
	entries, _, err := s.List(ctx)
	require.NoError(t, err)
	byKey := map[string]informer.Entry[string, item]{}
	for _, e := range entries {
		byKey[e.Key] = e
	}
	assert.Len(t, byKey, 3)
	checkBad(byKey["bad"].Err)
	assert.Equal(t, bad, byKey["bad"].Revision)
	assert.Equal(t, item{N: 2}, byKey["after"].Value)

	entries, _, err = s.ListBuckets(ctx, []int{s.BucketOf("bad")})
	require.NoError(t, err)
	i := slices.IndexFunc(entries, func(e informer.Entry[string, item]) bool { return e.Key == "bad" })
	require.GreaterOrEqual(t, i, 0, "the bad key is in its bucket: %+v", entries)
	checkBad(entries[i].Err)

	require.Eventually(t, func() bool {
		return r.endedOr(func() bool { return r.lastRevision() >= after })
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r.stop())
	events, errs := badEvents(t, r.snapshot())
	assert.Equal(t, []informer.Event[string, item]{
		{Type: informer.Put, Key: "bad", Revision: bad},
		{Type: informer.Put, Key: "after", Value: item{N: 2}, Revision: after},
	}, events)
	if assert.Len(t, errs, 2) && assert.NotNil(t, errs[0], "the bad Put carries its error") {
		checkBad(errs[0])
	}
}

// No server is needed: the arguments are refused before any call.
func TestNewAndNewBucketsShouldReturnAnErrorForANilClientOrNoBuckets(t *testing.T) {
	s, err := etcdstore.New[item](nil, "/p/")
	assert.EqualError(t, err, `etcdstore.New("/p/"): nil client`)
	assert.Nil(t, s)
	_, err = etcdstore.NewBuckets[item](nil, "/p/", 4)
	assert.EqualError(t, err, `etcdstore.NewBuckets("/p/"): nil client`)
	_, err = etcdstore.NewBuckets[item](nil, "/p/", 0)
	assert.EqualError(t, err, `etcdstore.NewBuckets("/p/", 0): buckets must be positive`)
}
