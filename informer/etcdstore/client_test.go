package etcdstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/etcdstore"
)

func TestPutIfShouldFailWithErrConflictUnlessTheModRevisionIsTheExpectedOne(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	c := etcdstore.NewClient[item](cli, uniquePrefix(t), nil)

	created, err := c.PutIf(ctx, "a", item{N: 1}, 0)
	require.NoError(t, err, "0 means: must not exist")
	_, err = c.PutIf(ctx, "a", item{N: 2}, 0)
	require.ErrorIs(t, err, etcdstore.ErrConflict, "it exists now")
	assert.Contains(t, err.Error(), "found", "the error names the current revision")

	updated, err := c.PutIf(ctx, "a", item{N: 3}, created)
	require.NoError(t, err)
	assert.Greater(t, updated, created)
	_, err = c.PutIf(ctx, "a", item{N: 4}, created)
	require.ErrorIs(t, err, etcdstore.ErrConflict, "someone wrote after created")

	v, rev, ok, err := c.Get(ctx, "a")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, item{N: 3}, v, "a failed PutIf writes nothing")
	assert.Equal(t, updated, rev)

	delRev, deleted, err := c.Delete(ctx, "a")
	require.NoError(t, err)
	assert.True(t, deleted)
	assert.Greater(t, delRev, updated, "the delete's own revision")
	_, err = c.PutIf(ctx, "a", item{N: 5}, updated)
	require.ErrorIs(t, err, etcdstore.ErrConflict, "it was deleted")
}

func TestClientShouldRoundTripValuesUnderItsPrefix(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	c := etcdstore.NewClient[item](cli, prefix, etcdstore.JSON[item]{})

	_, _, ok, err := c.Get(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, ok)

	rev, err := c.Put(ctx, "x", item{N: 7, S: "seven"})
	require.NoError(t, err)
	raw, err := cli.Get(ctx, prefix+"x")
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	assert.JSONEq(t, `{"n":7,"s":"seven"}`, string(raw.Kvs[0].Value))
	assert.EqualValues(t, rev, raw.Kvs[0].ModRevision)

	v, got, ok, err := c.Get(ctx, "x")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, item{N: 7, S: "seven"}, v)
	assert.Equal(t, rev, got)

	_, deleted, err := c.Delete(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, deleted)

	resp, err := cli.Put(ctx, prefix+"bad", "nope")
	require.NoError(t, err)
	_, _, _, err = c.Get(ctx, "bad")
	var decodeErr *etcdstore.DecodeError
	require.ErrorAs(t, err, &decodeErr)
	assert.Equal(t, "bad", decodeErr.Key)
	assert.EqualValues(t, resp.Header.Revision, decodeErr.Revision)
}
