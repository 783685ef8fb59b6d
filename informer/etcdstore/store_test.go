package etcdstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// What the conformance suite cannot see: the bytes on the wire, and what a
// conflict's error says.
func TestStoreShouldWriteJSONUnderItsPrefixAndNameTheRevisionInAConflict(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	s := must.Do(etcdstore.New(cli, prefix, etcdstore.WithCodec[item](informer.JSON[item]{})))

	rev, err := s.Create(ctx, "x", item{N: 7, S: "seven"})
	require.NoError(t, err)
	raw, err := cli.Get(ctx, prefix+"x")
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	assert.JSONEq(t, `{"n":7,"s":"seven"}`, string(raw.Kvs[0].Value))
	assert.EqualValues(t, rev, raw.Kvs[0].ModRevision)

	_, err = s.Create(ctx, "x", item{N: 8})
	require.ErrorIs(t, err, informer.ErrConflict)
	assert.Contains(t, err.Error(), "mod revision "+itoa(rev), "the error names the key's revision")
}

// A value that does not decode is an error from Get, whose DecodeError's
// revision lets Update overwrite it.
func TestGetOfAnUndecodableValueShouldFailWithADecodeErrorThatUpdateCanFix(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	s := must.Do(etcdstore.New[item](cli, prefix))

	resp, err := cli.Put(ctx, prefix+"bad", "nope")
	require.NoError(t, err)
	_, _, ok, err := s.Get(ctx, "bad")
	var decodeErr *etcdstore.DecodeError
	require.ErrorAs(t, err, &decodeErr)
	assert.False(t, ok)
	assert.Equal(t, "bad", decodeErr.Key)
	assert.EqualValues(t, resp.Header.Revision, decodeErr.Revision)

	fixed, err := s.Update(ctx, "bad", item{N: 1}, decodeErr.Revision)
	require.NoError(t, err)
	v, rev, ok, err := s.Get(ctx, "bad")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, item{N: 1}, v)
	assert.Equal(t, fixed, rev)
}

func itoa(r informer.Revision) string { return strconv.FormatInt(int64(r), 10) }
