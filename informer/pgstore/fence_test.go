package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/pglock"
)

// TestFencedWritesShouldBeRefusedOnceANewerTermIsGranted: term 1 writes,
// term 2 is granted through pglock; term 1's typed writes and its Do are
// refused with ErrFenced and change nothing, term 2's succeed. Then term 2
// holds a Do open: the takeover to term 3 waits for it, so term 2's write
// commits before term 3 exists, and term 2 is fenced after.
func TestFencedWritesShouldBeRefusedOnceANewerTermIsGranted(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	leases := schema + ".leases"
	lock := pglock.NewLock(pool, "ctrl", pglock.WithTable(leases))
	require.NoError(t, lock.EnsureSchema(t.Context()))
	table, coll := newTable(t, pool, schema)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	store := must.Do(pgstore.New[item](db, newColl()))
	fence := func(term leader.Term) pgstore.Fence { return pgstore.Fence{Table: leases, Name: "ctrl", Term: term} }
	grant := func(old leader.Record, holder string, term leader.Term) leader.Record {
		t.Helper()
		now := time.Now()
		r := leader.Record{HolderIdentity: holder, Term: term, LeaseDuration: time.Second, AcquireTime: now, RenewTime: now}
		var err error
		if old.Version == 0 {
			r, err = lock.Create(t.Context(), r)
		} else {
			r, err = lock.Update(t.Context(), old, r)
		}
		require.NoError(t, err)
		return r
	}
	plain := func(tx pgx.Tx, key string, n int) error {
		_, err := tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET n = excluded.n`, key, n)
		return err
	}

	// Before any lease row: fenced.
	_, err := store.Fenced(fence(1)).Create(t.Context(), "k", item{N: 1})
	require.ErrorIs(t, err, pgstore.ErrFenced)

	rec := grant(leader.Record{}, "a", 1)
	old := store.Fenced(fence(1))
	rev, err := old.Create(t.Context(), "k", item{N: 1})
	require.NoError(t, err, "the leader's write succeeds")
	require.NoError(t, fence(1).Do(t.Context(), pool, func(tx pgx.Tx) error { return plain(tx, "t", 1) }))

	rec = grant(rec, "b", 2)
	_, err = old.Update(t.Context(), "k", item{N: 2}, rev)
	assert.ErrorIs(t, err, pgstore.ErrFenced, "the deposed leader's update")
	assert.NotErrorIs(t, err, informer.ErrConflict)
	_, err = old.Create(t.Context(), "new", item{N: 2})
	assert.ErrorIs(t, err, pgstore.ErrFenced, "the deposed leader's create")
	_, err = old.Delete(t.Context(), "k", 0)
	assert.ErrorIs(t, err, pgstore.ErrFenced, "the deposed leader's delete")
	ran := false
	err = fence(1).Do(t.Context(), pool, func(tx pgx.Tx) error { ran = true; return plain(tx, "t", 2) })
	assert.ErrorIs(t, err, pgstore.ErrFenced, "the deposed leader's plain SQL")
	assert.False(t, ran)
	v, got, ok, err := store.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, []any{true, rev, item{N: 1}}, []any{ok, got, v}, "nothing written under term 1")
	_, _, ok, err = store.Get(t.Context(), "new")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, []informer.Entry[string, item]{{Key: "t", Value: item{N: 1}}}, selectItems(t, pool, table))

	cur := store.Fenced(fence(2))
	rev, err = cur.Update(t.Context(), "k", item{N: 3}, rev)
	require.NoError(t, err, "the current leader's update")
	_, err = cur.Update(t.Context(), "k", item{N: 4}, rev-1)
	assert.ErrorIs(t, err, informer.ErrConflict, "a fenced write still compares revisions")

	// Term 2 inside its transaction; the takeover to term 3 must wait.
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- fence(2).Do(t.Context(), pool, func(tx pgx.Tx) error {
			close(inside)
			select { // the test's end releases it if the test fails first
			case <-release:
			case <-t.Context().Done():
				return t.Context().Err()
			}
			return plain(tx, "t", 3)
		})
	}()
	<-inside
	granted := make(chan error, 1)
	go func() {
		now := time.Now()
		_, err := lock.Update(t.Context(), rec, leader.Record{HolderIdentity: "c", Term: 3,
			LeaseDuration: time.Second, AcquireTime: now, RenewTime: now})
		granted <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE %leases%'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 5*time.Millisecond, "the takeover waits for the fenced transaction")
	select {
	case <-granted:
		require.FailNow(t, "term 3 granted while term 2's transaction holds the lease row")
	default:
	}
	close(release)
	require.NoError(t, <-done, "term 2's write commits before term 3 exists")
	require.NoError(t, <-granted)
	assert.Equal(t, []informer.Entry[string, item]{{Key: "t", Value: item{N: 3}}}, selectItems(t, pool, table))
	_, err = cur.Update(t.Context(), "k", item{N: 5}, rev)
	assert.ErrorIs(t, err, pgstore.ErrFenced, "term 2 is deposed now")
}

// A leader paused inside Do (here fn blocks, as a SIGSTOPped process would
// leave its transaction) holds the lease row FOR SHARE. The takeover's
// UPDATE of that row must not wait for the pause to end: the server ends
// the idle transaction after IdleTimeout, the takeover goes through, and
// the paused Do fails without writing.
func TestAWriterPausedInsideDoShouldNotHoldOffATakeoverBeyondItsIdleTimeout(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	leases := schema + ".leases"
	lock := pglock.NewLock(pool, "ctrl", pglock.WithTable(leases))
	require.NoError(t, lock.EnsureSchema(t.Context()))
	table, _ := newTable(t, pool, schema)
	now := time.Now()
	rec, err := lock.Create(t.Context(), leader.Record{HolderIdentity: "a", Term: 1, LeaseDuration: time.Second, AcquireTime: now, RenewTime: now})
	require.NoError(t, err)

	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		f := pgstore.Fence{Table: leases, Name: "ctrl", Term: 1, IdleTimeout: 300 * time.Millisecond}
		done <- f.Do(t.Context(), pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('paused', 1)`); err != nil {
				return err
			}
			close(inside)
			<-resume // the pause: the transaction sits idle, the row locked
			_, err := tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('after', 1)`)
			return err
		})
	}()
	<-inside
	var once sync.Once
	unpause := func() { once.Do(func() { close(resume) }) }
	defer unpause()

	// The takeover. Without the bound it waits until resume is closed,
	// that is until this test's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now = time.Now()
	_, err = lock.Update(ctx, rec, leader.Record{HolderIdentity: "b", Term: 2, LeaseDuration: time.Second, AcquireTime: now, RenewTime: now})
	require.NoError(t, err, "the takeover went through while the old leader was still paused")

	unpause()
	require.Error(t, <-done, "the paused leader's Do failed")
	assert.Empty(t, selectItems(t, pool, table), "nothing of the paused Do was written")
}
