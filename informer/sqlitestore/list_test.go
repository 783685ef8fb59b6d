package sqlitestore_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// A list large enough to be decoded on several goroutines keeps every key
// with its own value, and its bad values as bad entries.
func TestALargeListShouldDecodeEveryValueIntoItsOwnEntry(t *testing.T) {
	const n = 10_000
	db := openDB(t, sqlitestore.Options{Synchronous: sqlitestore.SynchronousOff})
	raw := outside(t, db.Path())
	tx, err := raw.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	for i := range n {
		data, _ := json.Marshal(item{N: i, S: "v" + strconv.Itoa(i)})
		if i%1000 == 7 {
			data = []byte(`{"n": "bad"}`)
		}
		_, err := tx.ExecContext(t.Context(), "INSERT INTO objects (coll, key, value) VALUES ('items', ?, ?)", "k"+strconv.Itoa(i), data)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())

	entries, _, err := must.Do(sqlitestore.New[item](db, "items")).List(t.Context())
	require.NoError(t, err)
	require.Len(t, entries, n)
	bad := 0
	for _, e := range entries {
		i, err := strconv.Atoi(e.Key[1:])
		require.NoError(t, err)
		if i%1000 == 7 {
			bad++
			var de *sqlitestore.DecodeError
			assert.ErrorAs(t, e.Err, &de)
			continue
		}
		require.NoError(t, e.Err, e.Key)
		assert.Equal(t, item{N: i, S: "v" + strconv.Itoa(i)}, e.Value, e.Key)
		assert.NotZero(t, e.Revision)
	}
	assert.Equal(t, n/1000, bad)
}
