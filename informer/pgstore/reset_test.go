package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
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
	other := must.Do(pgstore.New[item](newDB(t, h.pool, h.schema), h.coll))
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
// without the Rebase, before the reader checked its anchor: the new writes
// took the lost changes' revisions, the informer's reader went on from its
// cursor, skipped the first five new changes and kept the lost values.)
func TestInformerShouldRelistAfterARestoreAndRebase(t *testing.T) {
	relistAfterRestore(t, true)
}

// TestInformerShouldRelistAfterARestoreWithoutRebase: the same restore, and
// nobody calls Rebase. The informer's reader finds that the row it read last
// now holds another change (anchor.go), rebases the store itself, and the
// informer relists. (Failed before the anchor: the informer kept the lost
// values and missed the first five new changes.)
func TestInformerShouldRelistAfterARestoreWithoutRebase(t *testing.T) {
	relistAfterRestore(t, false)
}

func relistAfterRestore(t *testing.T, rebase bool) {
	// The informer's reader polls only when its own process writes (mine):
	// the restore and the writes after it (other's) happen between two of
	// its polls, as they could in production between two NOTIFYs.
	var mine *pgstore.Store[item]
	h := newHarness(t, []pgstore.DBOption{pgstore.WithPollOnly(), pgstore.WithFastPollInterval(time.Hour)},
		func(s *pgstore.Store[item]) informer.Source[string, item] { mine = s; return s })
	other := must.Do(pgstore.New[item](newDB(t, h.pool, h.schema), h.coll))
	for i := range 10 {
		_, err := mine.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	restore := backup(t, h.pool, h.schema)
	// Changes after the backup, seen by the informer, then lost.
	for i := range 5 {
		_, rev, _, err := mine.Get(t.Context(), key(i))
		require.NoError(t, err)
		_, err = mine.Update(t.Context(), key(i), item{N: 100 + i}, rev)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return cacheOf(h)[key(4)].N == 104 }, 10*time.Second, 5*time.Millisecond)

	restore()
	if rebase {
		require.NoError(t, pgstore.Rebase(t.Context(), h.pool, h.schema))
	}
	want := writeAfterRestore(t, other)
	_, err := mine.Create(t.Context(), key(15), item{N: 15}) // wakes the informer's reader
	require.NoError(t, err)
	want[key(15)] = item{N: 15}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, cacheOf(h)) }, 10*time.Second, 5*time.Millisecond,
		"the informer holds the restored contents and the new writes")
	assert.Positive(t, h.inf.Stats().Expired, "the watch expired")
}

// backup copies the schema's log and head and the sequence's position, and
// returns the restore: contents and sequence put back as backed up, as a
// dump's restore would (the store's meta row is the same before and after).
func backup(t *testing.T, pool *pgxpool.Pool, schema string) (restore func()) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	var seq int64
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+s+`.log_b AS SELECT * FROM `+s+`.log;
		CREATE TABLE `+s+`.head_b AS SELECT * FROM `+s+`.head`)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT last_value FROM `+s+`.rev`).Scan(&seq))
	return func() {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
			for _, q := range []string{`TRUNCATE ` + s + `.log, ` + s + `.head`, `INSERT INTO ` + s + `.log SELECT * FROM ` + s + `.log_b`,
				`INSERT INTO ` + s + `.head SELECT * FROM ` + s + `.head_b`} {
				if _, err := tx.Exec(t.Context(), q); err != nil {
					return err
				}
			}
			_, err := tx.Exec(t.Context(), `SELECT setval('`+s+`.rev', $1)`, seq)
			return err
		}))
	}
}

// writeAfterRestore is the writers coming back after the restore of
// relistAfterRestore's keys 0-9: 10 changes, more than were lost (updates
// of keys 5-9, creates of 10-14). It returns the contents the store then
// holds.
func writeAfterRestore(t *testing.T, w *pgstore.Store[item]) map[string]item {
	t.Helper()
	want := make(map[string]item)
	for i := range 10 {
		want[key(i)] = item{N: i}
	}
	for i := 5; i < 10; i++ {
		_, rev, _, err := w.Get(t.Context(), key(i))
		require.NoError(t, err)
		_, err = w.Update(t.Context(), key(i), item{N: 200 + i}, rev)
		require.NoError(t, err)
		want[key(i)] = item{N: 200 + i}
	}
	for i := 10; i < 15; i++ {
		_, err := w.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
		want[key(i)] = item{N: i}
	}
	return want
}

// TestAWatchResumedAfterARestoreExpires: a process's Watch read changes that
// a restore then lost, and ended (its reader stopped with it); writers came
// back after the restore. A Watch resumed after the last revision it
// emitted fails with ErrRevisionExpired (the DB finds its anchor gone
// before it reads anything), the store is rebased (its base moved), and a
// List and Watch from there see the restored contents and new writes.
// (Failed before the anchor: the resumed Watch emitted the new writes above
// its revision and nothing below, the lost values stayed.)
func TestAWatchResumedAfterARestoreExpires(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	mine := must.Do(pgstore.New[item](newDB(t, pool, schema, pgstore.WithLogger(quiet)), coll))
	other := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))
	var from informer.Revision // the backup's
	for i := range 10 {
		var err error
		from, err = other.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	restore := backup(t, pool, schema)
	var last informer.Revision
	for i := range 5 {
		_, rev, _, err := other.Get(t.Context(), key(i))
		require.NoError(t, err)
		last, err = other.Update(t.Context(), key(i), item{N: 100 + i}, rev)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	err := mine.Watch(ctx, from, func(e informer.Event[string, item]) error {
		if e.Revision >= last {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled, "the Watch read up to the last change")

	restore()
	writeAfterRestore(t, other)
	var base int64
	s := pgx.Identifier{schema}.Sanitize()
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT base FROM `+s+`.meta`).Scan(&base))
	err = mine.Watch(t.Context(), last, func(e informer.Event[string, item]) error {
		return fmt.Errorf("emitted %v after a restore", e)
	})
	require.ErrorIs(t, err, informer.ErrRevisionExpired)
	var rebased int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT base FROM `+s+`.meta`).Scan(&rebased))
	assert.Greater(t, rebased, int64(last), "the store was rebased above every revision it handed out")
	assert.Greater(t, rebased, base)
}

// TestACompactionUpToTheReadersLastRowIsNotARestore: compaction deletes the
// row the reader read last (a delete, compacted with keep 0, at exactly
// the reader's revision); the Watch goes on without expiring and the store
// is not rebased.
func TestACompactionUpToTheReadersLastRowIsNotARestore(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema, pgstore.WithCompaction(-1, 0))
	store := must.Do(pgstore.New[item](db, newColl()))
	rev, err := store.Create(t.Context(), "a", item{N: 1})
	require.NoError(t, err)
	w := watch(t, store, rev-1)
	require.Equal(t, rev, w.next(t).Revision)
	del, err := store.Delete(t.Context(), "a", rev)
	require.NoError(t, err)
	require.Equal(t, informer.Delete, w.next(t).Type)
	var base int64
	s := pgx.Identifier{schema}.Sanitize()
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT base FROM `+s+`.meta`).Scan(&base))
	c, err := store.Compact(t.Context(), 0)
	require.NoError(t, err)
	require.Equal(t, del, c, "compacted up to the reader's last row")
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s+`.log WHERE rev = $1`, int64(del)).Scan(&n))
	require.Zero(t, n, "the delete's row is gone")

	next, err := store.Create(t.Context(), "b", item{N: 2})
	require.NoError(t, err)
	e := w.next(t)
	assert.Equal(t, next, e.Revision, "the Watch goes on: %v", e)
	var after int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT base FROM `+s+`.meta`).Scan(&after))
	assert.Equal(t, base, after, "not rebased")
}
