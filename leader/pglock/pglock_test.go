package pglock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/locktest"
	"github.com/converge-go/converge/leader/pglock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newPool connects to the test server and closes the pool when t ends.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testserver.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// lockName is unique to t and to this run, since the server is shared
// across tests, packages and runs.
func lockName(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
}

// newLock returns a lock on the default table, created if needed.
func newLock(t *testing.T, pool *pgxpool.Pool, opts ...pglock.Option) *pglock.Lock {
	t.Helper()
	l := pglock.NewLock(pool, lockName(t), opts...)
	require.NoError(t, l.EnsureSchema(t.Context()))
	return l
}

func TestLockShouldSatisfyTheLockContract(t *testing.T) {
	pool := newPool(t)
	locktest.Run(t, func(t *testing.T) leader.Lock { return newLock(t, pool) })
}

func TestLockShouldWorkInAnotherTableWithTheSimpleProtocol(t *testing.T) {
	pool := newPool(t)
	table := fmt.Sprintf("converge_leases_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		assert.NoError(t, err)
	})
	opts := []pglock.Option{pglock.WithTable(table), pglock.WithQueryExecMode(pgx.QueryExecModeSimpleProtocol)}
	// Several processes ensuring the schema at once must all succeed.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, pglock.NewLock(pool, "x", opts...).EnsureSchema(t.Context())) })
	}
	wg.Wait()
	locktest.Run(t, func(t *testing.T) leader.Lock { return newLock(t, pool, opts...) })
}

func TestOperationsShouldReportAMissingTable(t *testing.T) {
	l := pglock.NewLock(newPool(t), "x", pglock.WithTable("converge_no_such_table"))
	_, err := l.Get(t.Context())
	require.Error(t, err)
	assert.NotErrorIs(t, err, leader.ErrNotFound)
	assert.Contains(t, err.Error(), "EnsureSchema")
}

func TestVersionsShouldGrowAndConflictingCreateShouldReturnTheStoredRecord(t *testing.T) {
	l := newLock(t, newPool(t))
	v1, err := l.Create(t.Context(), leader.Record{HolderIdentity: "a", Term: 1, Version: 99})
	require.NoError(t, err)
	assert.Equal(t, int64(1), v1.Version)
	v2, err := l.Update(t.Context(), v1, leader.Record{HolderIdentity: "b", Term: 2})
	require.NoError(t, err)
	assert.Equal(t, int64(2), v2.Version)

	cur, err := l.Create(t.Context(), leader.Record{HolderIdentity: "c", Term: 1})
	require.ErrorIs(t, err, leader.ErrConflict)
	assert.Equal(t, v2, cur)
	got, err := l.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, v2, got, "Update returns the record as Get reads it back")
}

func TestTwoElectorsShouldHaveOneLeaderAndHandOverOnRelease(t *testing.T) {
	name := lockName(t)
	require.NoError(t, pglock.NewLock(newPool(t), name).EnsureSchema(t.Context()))
	locktest.Handover(t, func(t *testing.T) leader.Lock { return pglock.NewLock(newPool(t), name) })
}
