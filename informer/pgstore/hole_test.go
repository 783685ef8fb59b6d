package pgstore_test

import (
	"context"
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

// TestWatchShouldWaitForASlowWriterAndFillAnAbortedOne holds a raw
// transaction open after it took a revision, writes a later change of
// another key, and waits until the Watch's fill blocks on the open
// transaction. Committed, the slow change comes first; rolled back, a fill
// stands for it and the later change follows.
func TestWatchShouldWaitForASlowWriterAndFillAnAbortedOne(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "Commit", false: "Rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			coll := newColl()
			s := must.Do(pgstore.New[item](db, coll))
			_, after, err := s.List(t.Context())
			require.NoError(t, err)
			events := watchEvents(t, s, after, 10)

			tx, slow := openSlowWrite(t, pool, schema, coll)
			fast, err := s.Create(t.Context(), "fast", item{N: 2})
			require.NoError(t, err)
			require.Greater(t, int64(fast), slow)

			// The watch must be blocked on the open transaction, not past it.
			waitForFill(t, pool, "the Watch")
			select {
			case e := <-events:
				t.Fatalf("Watch emitted %v %s at %d while revision %d was open", e.Type, e.Key, e.Revision, slow)
			default:
			}
			if commit {
				require.NoError(t, tx.Commit(t.Context()))
			} else {
				require.NoError(t, tx.Rollback(t.Context()))
			}
			var got []informer.Event[string, item]
			for len(got) < map[bool]int{true: 2, false: 1}[commit] {
				select {
				case e := <-events:
					got = append(got, e)
				case <-time.After(10 * time.Second):
					t.Fatalf("Watch emitted only %v", got)
				}
			}
			want := []informer.Event[string, item]{{Type: informer.Put, Key: "fast", Value: item{N: 2}, Revision: fast}}
			if commit {
				want = append([]informer.Event[string, item]{{Type: informer.Put, Key: "slow", Value: item{N: 1}, Revision: informer.Revision(slow)}}, want...)
			} else {
				var op string
				require.NoError(t, pool.QueryRow(t.Context(), `SELECT op FROM `+pgx.Identifier{schema}.Sanitize()+`.log WHERE rev = $1`, slow).Scan(&op))
				assert.Equal(t, "f", op, "the aborted revision is a fill")
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestListShouldWaitForASlowWriterBelowItsRevisionAndFillAnAbortedOne holds
// a raw transaction open after it took a revision, commits a later change,
// and lists: the List's revision is at least the later change's, so it
// must not return before the slow one is resolved (a List at a plain
// snapshot would lose it for good: the watch after that revision never
// sees it). Committed, the List holds it; rolled back, a fill stands for it.
func TestListShouldWaitForASlowWriterBelowItsRevisionAndFillAnAbortedOne(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "Commit", false: "Rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			coll := newColl()
			s := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))
			tx, slow := openSlowWrite(t, pool, schema, coll)
			fast, err := s.Create(t.Context(), "fast", item{N: 2})
			require.NoError(t, err)
			require.Greater(t, int64(fast), slow)

			type listed struct {
				entries []informer.Entry[string, item]
				rev     informer.Revision
				err     error
			}
			done := make(chan listed, 1)
			go func() {
				e, r, err := s.List(t.Context())
				done <- listed{e, r, err}
			}()
			waitForFill(t, pool, "the List")
			select {
			case l := <-done:
				t.Fatalf("List returned %v at %d (err %v) while revision %d was open", l.entries, l.rev, l.err, slow)
			default:
			}
			want := []informer.Entry[string, item]{{Key: "fast", Value: item{N: 2}}}
			if commit {
				require.NoError(t, tx.Commit(t.Context()))
				want = append(want, informer.Entry[string, item]{Key: "slow", Value: item{N: 1}})
			} else {
				require.NoError(t, tx.Rollback(t.Context()))
			}
			l := <-done
			require.NoError(t, l.err)
			assert.GreaterOrEqual(t, l.rev, fast)
			assert.Equal(t, want, withoutRevisions(l.entries))
		})
	}
}

// openSlowWrite takes a revision for key "slow" of coll in a raw
// transaction it leaves open (rolled back when t ends unless ended).
func openSlowWrite(t *testing.T, pool *pgxpool.Pool, schema, coll string) (pgx.Tx, int64) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var slow int64
	require.NoError(t, tx.QueryRow(t.Context(), `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+
		`.log (rev, coll, key, op, value) VALUES (nextval('`+schema+`.rev'), $1, 'slow', 'p', '{"n":1}') RETURNING rev`,
		coll).Scan(&slow))
	return tx, slow
}

// waitForFill waits until a fill is blocked on an open transaction's row.
func waitForFill(t *testing.T, pool *pgxpool.Pool, who string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%.fill(%'`).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, time.Millisecond, who+"'s fill did not wait for the open transaction")
}
