package pgstore_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
)

// Bad arguments are refused where they are given, with a message naming
// them, not at the first query. No server is needed.
func TestBadArgumentsShouldBeRefusedWhereTheyAreGiven(t *testing.T) {
	long := strings.Repeat("s", 64)
	err := pgstore.Setup(t.Context(), nil, long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 63")
	err = pgstore.Setup(t.Context(), nil, "ok")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nil pool")

	assert.PanicsWithValue(t, "pgstore: NewDB: nil pool", func() { pgstore.NewDB(nil) })
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none") // lazy: never dials here
	require.NoError(t, err)
	defer pool.Close()
	assert.Panics(t, func() { pgstore.NewDB(pool, pgstore.WithSchema(long)) })
	db := pgstore.NewDB(pool)
	assert.Panics(t, func() { pgstore.New[int](db, "") })
	assert.Panics(t, func() { pgstore.New[int](nil, "c") })
}
