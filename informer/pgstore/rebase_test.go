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

// TestAWriteInFlightDuringARebaseShouldReachTheRelistedInformer: a
// transaction has taken a revision (a typed write() in it, or a plain
// INSERT into a followed table) and is still open when Rebase runs. Rebase
// must wait for it: the change then commits below the new base, where no
// Watch looks, and only a List taken after it commits holds it. So the
// informer, which relists because of the Rebase, must end with the change,
// equal to a List. (Failed before Rebase locked the log: Rebase returned at
// once, the informer relisted without the open change, and after it
// committed the informer never got it.)
func TestAWriteInFlightDuringARebaseShouldReachTheRelistedInformer(t *testing.T) {
	for _, path := range []string{"typed", "table"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t, nil, passThrough)
			other := must.Do(pgstore.New[item](newDB(t, h.pool, h.schema), h.coll))
			s := pgx.Identifier{h.schema}.Sanitize()
			var table string
			if path == "table" {
				table = pgx.Identifier{h.schema, "w_" + h.coll}.Sanitize()
				_, err := h.pool.Exec(t.Context(), `CREATE TABLE `+table+` (id text PRIMARY KEY, n int NOT NULL, s text)`)
				require.NoError(t, err)
				require.NoError(t, pgstore.Follow(t.Context(), h.pool, h.schema, table, h.coll))
			}
			put := func(k string, n int) {
				t.Helper()
				if table != "" {
					require.NoError(t, upsert(t.Context(), h.pool, table, k, item{N: n}))
					return
				}
				_, err := other.Create(t.Context(), k, item{N: n})
				require.NoError(t, err)
			}
			put(key(0), 0)
			require.Eventually(t, func() bool { return h.inf.Len() == 1 }, 10*time.Second, 5*time.Millisecond)

			tx, err := h.pool.Begin(t.Context())
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			if table != "" {
				_, err = tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('held', 7)`)
			} else {
				_, err = tx.Exec(t.Context(), `SELECT `+s+`.write($1, 'held', 'c', 0, '{"n":7}')`, h.coll)
			}
			require.NoError(t, err)

			rebased := make(chan error, 1)
			go func() { rebased <- pgstore.Rebase(context.Background(), h.pool, h.schema) }()
			var done bool
			require.Eventually(t, func() bool {
				select {
				case err := <-rebased:
					require.NoError(t, err)
					done = true
					return true
				default:
					return rebaseWaits(t, h.pool)
				}
			}, 10*time.Second, time.Millisecond, "Rebase neither returned nor waited for the open write")
			if done {
				// Rebase did not wait: the informer relists while the write
				// is open, as it would with any write after the Rebase.
				put(key(1), 1)
				require.Eventually(t, func() bool { _, ok := cacheOf(h)[key(1)]; return ok }, 10*time.Second, 5*time.Millisecond)
			}
			require.NoError(t, tx.Commit(t.Context()))
			if !done {
				require.NoError(t, <-rebased)
			}

			put(key(2), 2) // after it, the informer holds everything before
			require.Eventually(t, func() bool { _, ok := cacheOf(h)[key(2)]; return ok }, 10*time.Second, 5*time.Millisecond)
			assert.Equal(t, 7, cacheOf(h)["held"].N, "the write held open across the Rebase reached the informer")
			assert.Positive(t, h.inf.Stats().Expired, "the informer relisted")
			assert.Equal(t, listOf(t, other), cacheOf(h), "the informer equals a List")
		})
	}
}

// TestARebaseWaitingForAnIdleTransactionShouldNotStallOtherWriters: a
// session left idle in a transaction after a write holds Rebase off until
// it ends, but the schema's other writers, which queue behind Rebase's lock
// while it waits, get through between its tries. (Checked with one LOCK
// without lock_timeout: the other write waited for the idle transaction.)
func TestARebaseWaitingForAnIdleTransactionShouldNotStallOtherWriters(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	w := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))
	tx, _ := openSlowWrite(t, pool, schema, coll)

	ctx, cancel := context.WithCancel(t.Context())
	rebased := make(chan error, 1)
	go func() { rebased <- pgstore.Rebase(ctx, pool, schema) }()
	waitForRebaseLock(t, pool)
	wrote := make(chan error, 1)
	go func() { _, err := w.Create(t.Context(), "other", item{N: 1}); wrote <- err }()
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case err := <-rebased:
		t.Fatalf("Rebase returned (%v) with a write of the log open", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a write waited for the idle transaction behind Rebase")
	}
	cancel()
	require.ErrorIs(t, <-rebased, context.Canceled)
	require.NoError(t, tx.Commit(t.Context()))
	require.NoError(t, pgstore.Rebase(t.Context(), pool, schema), "with nothing open, Rebase goes through")
}

// rebaseWaits reports whether a Rebase waits for the log's lock.
func rebaseWaits(t *testing.T, pool *pgxpool.Pool) bool {
	var n int
	err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE%'`).Scan(&n)
	return err == nil && n > 0
}

// waitForRebaseLock waits until a Rebase waits for the log's lock.
func waitForRebaseLock(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Eventually(t, func() bool { return rebaseWaits(t, pool) }, 10*time.Second, time.Millisecond,
		"Rebase did not wait for the open write")
}

// listOf returns s's List as a map, retrying while List fails (the server
// may be restarting).
func listOf(t *testing.T, s *pgstore.Store[item]) map[string]item {
	t.Helper()
	var entries []informer.Entry[string, item]
	require.Eventually(t, func() bool {
		var err error
		entries, _, err = s.List(t.Context())
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)
	m := make(map[string]item, len(entries))
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	return m
}
