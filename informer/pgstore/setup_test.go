package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// TestSetupShouldSucceedForEveryConcurrentCallerOnAFreshSchema: 8
// goroutines call Setup at once on a schema that does not exist; all
// succeed, and there is one schema with one meta row (one store id, one
// base). Setup again later changes neither.
func TestSetupShouldSucceedForEveryConcurrentCallerOnAFreshSchema(t *testing.T) {
	pool := newPool(t)
	schema := fmt.Sprintf("cvt_setup_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	start := make(chan struct{})
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = pgstore.Setup(t.Context(), pool, schema)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "caller %d", i)
	}
	meta := func() (n int, id string, base int64) {
		t.Helper()
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*), min(store_id::text), min(base) FROM `+
			pgx.Identifier{schema}.Sanitize()+`.meta`).Scan(&n, &id, &base))
		return n, id, base
	}
	n, id, base := meta()
	assert.Equal(t, 1, n, "one meta row")
	var schemas int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&schemas))
	assert.Equal(t, 1, schemas)

	require.NoError(t, pgstore.Setup(t.Context(), pool, schema))
	n2, id2, base2 := meta()
	assert.Equal(t, []any{n, id, base}, []any{n2, id2, base2}, "Setup again keeps the store's identity")
}

// TestSetupOnAnUpToDateSchemaShouldNotWaitForAnOpenWrite: a typed write's
// transaction is left open (it holds the log and head against DDL); Setup
// on the schema, which it already set up, returns at once. (Failed while
// Setup ran its DDL on every call: CREATE INDEX IF NOT EXISTS waited for
// the open write, until the context's deadline.)
func TestSetupOnAnUpToDateSchemaShouldNotWaitForAnOpenWrite(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `SELECT `+pgx.Identifier{schema}.Sanitize()+`.write('c', 'k', 'c', 0, '\x7b7d')`)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	require.NoError(t, pgstore.Setup(ctx, pool, schema))
}

// TestSetupShouldNotDeadlockWithTypedWritesRunningAtTheSameTime: 4
// goroutines loop Store.Update while another pool calls Setup every 20 ms
// for 3 s, first on an up-to-date schema, then on one made out of date
// before every call (so each runs its DDL). No write and no Setup fails.
// (Failed with "deadlock detected" (40P01) on writes and on Setup while
// Setup's DDL took the log's and head's locks in the opposite order to
// a write.)
func TestSetupShouldNotDeadlockWithTypedWritesRunningAtTheSameTime(t *testing.T) {
	for _, outdated := range []bool{false, true} {
		t.Run(fmt.Sprintf("outdated=%v", outdated), func(t *testing.T) {
			pool, setupPool := newPool(t), newPool(t)
			schema := newSchema(t, pool)
			store := must.Do(pgstore.New[item](newDB(t, pool, schema), newColl()))
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				errs   []error
				writes atomic.Int64
			)
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			}
			for w := range 4 {
				wg.Go(func() {
					key := fmt.Sprintf("k%d", w)
					rev, err := store.Create(t.Context(), key, item{N: 0})
					if err != nil {
						fail(err)
						return
					}
					for n := 1; ctx.Err() == nil; n++ {
						rev, err = store.Update(ctx, key, item{N: n}, rev)
						if err != nil {
							if ctx.Err() == nil {
								fail(err)
							}
							return
						}
						writes.Add(1)
					}
				})
			}
			setups := 0
			for ctx.Err() == nil {
				if outdated {
					_, err := setupPool.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema}.Sanitize()+`.version SET script = 'old'`)
					require.NoError(t, err)
				}
				if err := pgstore.Setup(t.Context(), setupPool, schema); err != nil {
					fail(fmt.Errorf("setup: %w", err))
				}
				setups++
				time.Sleep(20 * time.Millisecond) // the pace of the reproduction, not a synchronisation
			}
			wg.Wait()
			t.Logf("%d writes, %d setups", writes.Load(), setups)
			assert.Empty(t, errs)
			assert.Greater(t, writes.Load(), int64(100), "too few writes to matter")
			assert.Greater(t, setups, 10)
		})
	}
}
