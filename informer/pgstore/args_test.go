package pgstore_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
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

	_, err = pgstore.NewDB(nil)
	assert.EqualError(t, err, "pgstore.NewDB: nil pool")
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none") // lazy: never dials here
	require.NoError(t, err)
	defer pool.Close()
	_, err = pgstore.NewDB(pool, pgstore.WithSchema(long))
	assert.ErrorContains(t, err, "pgstore.NewDB: ")
	assert.ErrorContains(t, err, "at most 63")
	_, err = pgstore.NewDB(pool, nil)
	assert.EqualError(t, err, "pgstore.NewDB: option 0 is nil")
	db := must.Do(pgstore.NewDB(pool))
	_, err = pgstore.New[int](db, "")
	assert.ErrorContains(t, err, `pgstore.New: want a DB and a collection name`)
	_, err = pgstore.New[int](nil, "c")
	assert.ErrorContains(t, err, `pgstore.New: want a DB and a collection name, got db <nil> and collection "c"`)
	_, err = pgstore.New[int](db, "c", nil)
	assert.EqualError(t, err, `pgstore.New("c"): option 0 is nil`)
	_, err = pgstore.NewTable[int](nil, "c")
	assert.ErrorContains(t, err, "pgstore.NewTable: want a DB")
	s := must.Do(pgstore.New[int](db, "c"))
	_, err = pgstore.NewBuckets(s, 0)
	assert.EqualError(t, err, `pgstore.NewBuckets("c", 0): buckets must be positive`)
	_, err = pgstore.NewBuckets[int](nil, 4)
	assert.EqualError(t, err, "pgstore.NewBuckets: nil Store")
}
