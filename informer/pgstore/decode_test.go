package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// listKeys is more than a few decode chunks, so a List decodes on several
// goroutines at once (decode.go).
const listKeys = 3000

// writeValues writes listKeys keys k00000… of coll in one statement, each
// value {"n": i}, except that the keys in bad get a value that is not JSON.
func writeValues(t *testing.T, pool *pgxpool.Pool, schema, coll string, bad ...int) {
	t.Helper()
	broken := make([]int64, len(bad))
	for i, b := range bad {
		broken[i] = int64(b)
	}
	_, err := pool.Exec(t.Context(), `SELECT count(`+pgx.Identifier{schema}.Sanitize()+`.write($1, format('k%s', lpad(g::text, 5, '0')), 'c', 0,
		CASE WHEN g = ANY($3) THEN convert_to('not json', 'UTF8') ELSE convert_to(format('{"n": %s}', g), 'UTF8') END))
		FROM generate_series(0, $2 - 1) g`, coll, listKeys, broken)
	require.NoError(t, err)
}

func TestAListDecodesEveryValueAndReturnsThemInKeyOrder(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	writeValues(t, pool, schema, coll)
	store := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))

	entries, rev, err := store.List(t.Context())
	require.NoError(t, err)
	assert.Positive(t, int64(rev))
	require.Len(t, entries, listKeys)
	for i, e := range entries {
		require.Positive(t, int64(e.Revision))
		require.LessOrEqual(t, e.Revision, rev)
		require.Equal(t, informer.Entry[string, item]{Key: fmt.Sprintf("k%05d", i), Value: item{N: i}, Revision: e.Revision}, e)
	}
}
