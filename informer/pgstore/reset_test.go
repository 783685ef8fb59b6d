package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
)

// passThrough makes newHarness run no recording Watch beside the informer
// (that Watch fails the test on ErrRevisionExpired, which these tests cause).
func passThrough(s *pgstore.Store[item]) informer.Source[string, item] { return s }

// cacheOf returns the informer's cache as a map.
func cacheOf(h *harness) map[string]item {
	m := make(map[string]item)
	for _, e := range h.inf.List() {
		m[e.Key] = e.Value
	}
	return m
}

// TestInformerShouldRelistAfterTheStoreIsReset: under a live informer the
// schema is dropped and set up again, and the new store gets other
// contents (one key of the old store among them, with another value). The
// informer's watch expires (the new store's revisions start above every
// old one), it relists and holds exactly the new contents: no old key
// resurrected, the shared key at its new value. (Failed with expired()
// answering nil: the reader took the new store's first row for a hole
// after the old cursor and the informer kept the old keys.)
func TestInformerShouldRelistAfterTheStoreIsReset(t *testing.T) {
	h := newHarness(t, nil, passThrough)
	other := pgstore.New[item](newDB(t, h.pool, h.schema), h.coll)
	for i := range 10 {
		_, err := other.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.inf.Len() == 10 }, 10*time.Second, 5*time.Millisecond)

	_, err := h.pool.Exec(t.Context(), "DROP SCHEMA "+pgx.Identifier{h.schema}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	require.NoError(t, pgstore.Setup(t.Context(), h.pool, h.schema))
	want := map[string]item{key(9): {N: 900}}
	for i := 20; i < 25; i++ {
		want[key(i)] = item{N: i}
	}
	for k, v := range want {
		_, err := other.Create(t.Context(), k, v)
		require.NoError(t, err)
	}

	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, cacheOf(h)) }, 10*time.Second, 5*time.Millisecond,
		"the informer holds the new store's contents")
	assert.Positive(t, h.inf.Stats().Expired, "the watch expired")
	// Nothing of the old store comes back later either.
	for k, v := range map[string]item{key(21): {N: 2100}, key(22): {N: 2200}} {
		_, rev, _, err := other.Get(t.Context(), k)
		require.NoError(t, err)
		_, err = other.Update(t.Context(), k, v, rev)
		require.NoError(t, err)
		want[k] = v
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, cacheOf(h)) }, 10*time.Second, 5*time.Millisecond)
}

// TestInformerShouldRelistAfterARestoreAndRebase simulates restoring the
// schema from a backup taken while an informer ran: the log, head and
// sequence are put back as they were at the backup, losing changes the
// informer has seen; then Rebase; then writers come back (Rebase moved the
// sequence above every revision handed out before). The informer's
// watch expires, it relists, and it holds the restored contents plus the
// new writes: none of the lost changes stays in its cache. (Failed
// without the Rebase: the new writes took the lost changes' revisions, the
// informer's reader went on from its cursor, skipped the first five new
// changes and kept the lost values.)
func TestInformerShouldRelistAfterARestoreAndRebase(t *testing.T) {
	// The informer's reader polls only when its own process writes (mine):
	// the restore and the writes after it (other's) happen between two of
	// its polls, as they could in production between two NOTIFYs.
	var mine *pgstore.Store[item]
	h := newHarness(t, []pgstore.DBOption{pgstore.WithPollOnly(), pgstore.WithFastPollInterval(time.Hour)},
		func(s *pgstore.Store[item]) informer.Source[string, item] { mine = s; return s })
	other := pgstore.New[item](newDB(t, h.pool, h.schema), h.coll)
	s := pgx.Identifier{h.schema}.Sanitize()
	for i := range 10 {
		_, err := mine.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	// The backup: copies of log and head, and the sequence's position.
	var seq int64
	_, err := h.pool.Exec(t.Context(), `CREATE TABLE `+s+`.log_b AS SELECT * FROM `+s+`.log;
		CREATE TABLE `+s+`.head_b AS SELECT * FROM `+s+`.head`)
	require.NoError(t, err)
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT last_value FROM `+s+`.rev`).Scan(&seq))
	// Changes after the backup, seen by the informer, then lost.
	for i := range 5 {
		_, rev, _, err := mine.Get(t.Context(), key(i))
		require.NoError(t, err)
		_, err = mine.Update(t.Context(), key(i), item{N: 100 + i}, rev)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return cacheOf(h)[key(4)].N == 104 }, 10*time.Second, 5*time.Millisecond)

	// The restore, as a dump's would be: contents and sequence as backed up.
	require.NoError(t, pgx.BeginFunc(t.Context(), h.pool, func(tx pgx.Tx) error {
		for _, q := range []string{`TRUNCATE ` + s + `.log, ` + s + `.head`, `INSERT INTO ` + s + `.log SELECT * FROM ` + s + `.log_b`,
			`INSERT INTO ` + s + `.head SELECT * FROM ` + s + `.head_b`} {
			if _, err := tx.Exec(t.Context(), q); err != nil {
				return err
			}
		}
		_, err := tx.Exec(t.Context(), `SELECT setval('`+s+`.rev', $1)`, seq)
		return err
	}))
	require.NoError(t, pgstore.Rebase(t.Context(), h.pool, h.schema))

	// Writers come back: 10 changes, more than were lost.
	want := make(map[string]item)
	for i := range 10 {
		want[key(i)] = item{N: i}
	}
	for i := 5; i < 10; i++ {
		_, rev, _, err := other.Get(t.Context(), key(i))
		require.NoError(t, err)
		_, err = other.Update(t.Context(), key(i), item{N: 200 + i}, rev)
		require.NoError(t, err)
		want[key(i)] = item{N: 200 + i}
	}
	for i := 10; i < 15; i++ {
		_, err := other.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
		want[key(i)] = item{N: i}
	}
	_, err = mine.Create(t.Context(), key(15), item{N: 15}) // wakes the informer's reader
	require.NoError(t, err)
	want[key(15)] = item{N: 15}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, cacheOf(h)) }, 10*time.Second, 5*time.Millisecond,
		"the informer holds the restored contents and the new writes")
	assert.Positive(t, h.inf.Stats().Expired, "the watch expired")
}
