package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// TestTwoProcessesWritingOneFileKeepOneLog runs two writer children on one
// file at once, each creating its own keys and incrementing one shared
// counter with compare-and-swap, while this process watches: SQLite's
// locks serialise them, so every increment counts, each child's revisions
// rise, the log stays consistent, and the watch sees every write of both.
func TestTwoProcessesWritingOneFileKeepOneLog(t *testing.T) {
	const rounds = 25
	path := filepath.Join(t.TempDir(), "store.db")
	db := openPath(t, path, sqlitestore.Options{Synchronous: sqlitestore.SynchronousNormal})
	s := must.Do(sqlitestore.New[item](db, "items"))
	_, from, err := s.List(t.Context())
	require.NoError(t, err)

	a := startChild(t, path, "a", sqlitestore.SynchronousNormal, rounds)
	b := startChild(t, path, "b", sqlitestore.SynchronousNormal, rounds)
	var acked []ack
	for _, c := range []*child{a, b} {
		var last informer.Revision
		for x := range c.acks {
			assert.Greater(t, x.rev, last, "a child's revisions must rise")
			last = x.rev
			acked = append(acked, x)
		}
		require.NoError(t, c.cmd.Wait())
	}
	require.Len(t, acked, 4*rounds)

	v, _, ok, err := s.Get(t.Context(), counterKey)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2*rounds, v.N, "increments lost between the two processes")
	checkLog(t, path)

	// Every acknowledged revision is in this process's watch, in order.
	want := map[informer.Revision]string{}
	for _, x := range acked {
		want[x.rev] = x.key
	}
	seen := map[informer.Revision]string{}
	var last informer.Revision
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err = s.Watch(ctx, from, func(e informer.Event[string, item]) error {
		assert.Greater(t, e.Revision, last)
		last = e.Revision
		seen[e.Revision] = e.Key
		if len(seen) == len(want) {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, want, seen)
}
