package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

func TestRevisionShouldBeTheClustersCurrentRevisionAndTheInformersHead(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	s := must.Do(etcdstore.New[item](cli, prefix))

	rev, err := s.Create(ctx, "x", item{N: 1})
	require.NoError(t, err)
	head, err := s.Revision(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, head, rev, "at least the write's revision")

	other, err := cli.Put(ctx, prefix+"-elsewhere/y", "1") // outside the prefix: the cluster's revision moves
	require.NoError(t, err)
	head, err = s.Revision(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, head, informer.Revision(other.Header.Revision))

	inf := must.Do(informer.New[string, item]("items", s))
	got, ok, err := inf.Head(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "the informer finds the Store's HeadRevisioner")
	assert.GreaterOrEqual(t, got, head)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Revision(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
}
