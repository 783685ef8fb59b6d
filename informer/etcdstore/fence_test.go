package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

func fenceValue(t *testing.T, ctx context.Context, cli *clientv3.Client, key string) string {
	t.Helper()
	resp, err := cli.Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "fence %s", key)
	return string(resp.Kvs[0].Value)
}

// A bucket's fenced writes: the first creates the fence, a write of the
// bucket's epoch raises it, an older epoch's write is refused with
// ErrFenced and writes nothing, and a stale revision is still a conflict.
func TestFencedStoreShouldRefuseEveryWriteOfAnOlderEpochOfTheBucket(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	fences := strings.TrimSuffix(prefix, "/") + "-fences/"
	s := must.Do(etcdstore.New[item](cli, prefix))
	at := func(epoch uint64) *etcdstore.FencedStore[item] {
		st, err := s.Fenced(etcdstore.BucketFence(fences, shard.Bucket{ID: 3, Epoch: leaderTerm(epoch)}))
		require.NoError(t, err)
		return st
	}

	rev, err := at(2).Create(ctx, "x", item{N: 1})
	require.NoError(t, err, "the first write creates the fence")
	assert.Equal(t, fmt.Sprintf("%020d", 2), fenceValue(t, ctx, cli, fences+"3"))
	rev, err = at(2).Update(ctx, "x", item{N: 2}, rev)
	require.NoError(t, err, "the same epoch writes again")

	_, err = at(1).Update(ctx, "x", item{N: -1}, rev)
	require.ErrorIs(t, err, etcdstore.ErrFenced, "an older epoch")
	assert.NotErrorIs(t, err, informer.ErrConflict)
	_, err = at(1).Create(ctx, "y", item{N: -1})
	require.ErrorIs(t, err, etcdstore.ErrFenced)
	_, err = at(1).Delete(ctx, "x", 0)
	require.ErrorIs(t, err, etcdstore.ErrFenced)

	_, err = at(3).Update(ctx, "x", item{N: 3}, rev-1)
	require.ErrorIs(t, err, informer.ErrConflict, "a stale revision under a good fence")
	assert.NotErrorIs(t, err, etcdstore.ErrFenced)
	assert.Equal(t, fmt.Sprintf("%020d", 2), fenceValue(t, ctx, cli, fences+"3"), "a refused write raises nothing")

	_, _, err = informer.Update(ctx, at(10), "x", func(v *item) error { v.N = 10; return nil })
	require.NoError(t, err, "a newer epoch, through informer.Update")
	assert.Equal(t, fmt.Sprintf("%020d", 10), fenceValue(t, ctx, cli, fences+"3"), "10 > 9 as bytes only zero-padded")
	_, err = at(9).Delete(ctx, "x", 0)
	require.ErrorIs(t, err, etcdstore.ErrFenced)

	v, _, ok, err := s.Get(ctx, "x")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, item{N: 10}, v, "only the accepted writes landed")
	_, _, ok, err = s.Get(ctx, "y")
	require.NoError(t, err)
	assert.False(t, ok)

	del, err := at(10).Delete(ctx, "x", 0)
	require.NoError(t, err)
	assert.NotZero(t, del)
	del, err = at(10).Delete(ctx, "x", 0)
	require.NoError(t, err)
	assert.Zero(t, del, "nothing to delete")
}

// A leader term's fence around any etcd operations, and the layout of
// Buckets kept by its Fenced writes.
func TestFenceTxnShouldApplyOpsOnlyForTheNewestTermAndBucketsShouldKeepTheirLayout(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	fence := strings.TrimSuffix(prefix, "/") + "-term-fence"

	_, err := etcdstore.TermFence(fence, 5).Txn(ctx, cli, clientv3.OpPut(prefix+"raw", "five"))
	require.NoError(t, err)
	_, err = etcdstore.TermFence(fence, 4).Txn(ctx, cli, clientv3.OpPut(prefix+"raw", "four"))
	require.ErrorIs(t, err, etcdstore.ErrFenced)
	resp, err := cli.Get(ctx, prefix+"raw")
	require.NoError(t, err)
	assert.Equal(t, "five", string(resp.Kvs[0].Value))

	b := must.Do(etcdstore.NewBuckets[item](cli, prefix, 8))
	st, err := b.Fenced(etcdstore.TermFence(fence, 6))
	require.NoError(t, err)
	_, err = st.Create(ctx, "k", item{N: 6})
	require.NoError(t, err)
	resp, err = cli.Get(ctx, fmt.Sprintf("%s%d/k", prefix, shard.BucketOf("k", 8)))
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1, "the key is at <prefix><bucket>/<key>")
	v, _, ok, err := st.Get(ctx, "k")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, item{N: 6}, v)
}

func TestFencedShouldRejectAFenceInsideTheStoresPrefixOrWithoutAKey(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	require.NoError(t, err)
	defer cli.Close()
	s := must.Do(etcdstore.New[item](cli, "/app/items/"))
	_, err = s.Fenced(etcdstore.Fence{Key: "/app/items/fence", Token: 1})
	assert.ErrorContains(t, err, "prefix")
	_, err = s.Fenced(etcdstore.Fence{Token: 1})
	assert.ErrorContains(t, err, "Key")
	_, err = s.Fenced(etcdstore.Fence{Key: "/app/fence", Token: ^uint64(0)})
	assert.Error(t, err)
	_, err = s.Fenced(etcdstore.Fence{Key: "/app/fence", Token: 1})
	assert.NoError(t, err)
}

func leaderTerm(n uint64) leader.Term { return leader.Term(n) }
