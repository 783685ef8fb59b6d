package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// TestRevisionIsTheNewestCommittedChangeOfTheSchema: a fresh store's head is
// its compaction revision; then the revision of the newest committed change
// of any collection, for a Store and a TableSource alike; a revision taken
// by a transaction still open does not count until it commits.
func TestRevisionIsTheNewestCommittedChangeOfTheSchema(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	a, b := must.Do(pgstore.New[item](db, newColl())), must.Do(pgstore.New[item](db, newColl()))
	table := must.Do(pgstore.NewTable[item](db, newColl()))
	s := pgx.Identifier{schema}.Sanitize()
	head := func() informer.Revision {
		t.Helper()
		rev, err := a.Revision(t.Context())
		require.NoError(t, err)
		trev, err := table.Revision(t.Context())
		require.NoError(t, err)
		require.Equal(t, rev, trev, "a TableSource of the schema tells the same head")
		return rev
	}

	var compacted int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT compact_rev FROM `+s+`.meta`).Scan(&compacted))
	assert.Equal(t, informer.Revision(compacted), head(), "an empty store is at its compaction revision")

	r1, err := a.Create(t.Context(), "k", item{N: 1})
	require.NoError(t, err)
	assert.Equal(t, r1, head())
	r2, err := b.Create(t.Context(), "k", item{N: 2})
	require.NoError(t, err)
	assert.Equal(t, r2, head(), "another collection's change moves the head")

	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	var open int64
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT `+s+`.write($1, 'open', 'c', 0, '{}')`, b.Collection()).Scan(&open))
	require.Greater(t, open, int64(r2))
	assert.Equal(t, r2, head(), "a change not committed does not count")
	require.NoError(t, tx.Commit(t.Context()))
	assert.Equal(t, informer.Revision(open), head())
}

// TestAnInformerReachesItsStoresHead: the informer's Head is the Store's
// Revision, and once the informer has received every change (of its own
// collection, and bookmarks past another's) its LastRevision equals it.
func TestAnInformerReachesItsStoresHead(t *testing.T) {
	h := newHarness(t, nil, passThrough)
	other := newDB(t, h.pool, h.schema)
	mine, theirs := must.Do(pgstore.New[item](other, h.coll)), must.Do(pgstore.New[item](other, newColl()))
	for i := range 5 {
		_, err := mine.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	last, err := theirs.Create(t.Context(), "x", item{})
	require.NoError(t, err)

	rev, ok, err := h.inf.Head(t.Context())
	require.NoError(t, err)
	require.True(t, ok, "the Source implements informer.HeadRevisioner")
	assert.Equal(t, last, rev)
	require.Eventually(t, func() bool { return h.inf.LastRevision() == rev }, 10*time.Second, 5*time.Millisecond,
		"the informer reaches the head")
	assert.Equal(t, 5, h.inf.Len())
}

// TestRevisionSaysToCallSetupWithoutTheSchema.
func TestRevisionSaysToCallSetupWithoutTheSchema(t *testing.T) {
	db := newDB(t, newPool(t), "cvt_no_such_schema")
	_, err := must.Do(pgstore.New[item](db, "c")).Revision(t.Context())
	require.ErrorContains(t, err, "call pgstore.Setup")
}
