package sqlitestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

type item struct {
	N int    `json:"n"`
	S string `json:"s"`
}

// openDB opens a DB on a new file in a temporary directory, closed at the
// end of the test.
func openDB(t *testing.T, opts sqlitestore.Options) *sqlitestore.DB {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "store.db"), opts)
}

func openPath(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.DB {
	t.Helper()
	db, err := sqlitestore.Open(t.Context(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// outside opens path as another program would: a plain connection, no
// converge code, writing through the objects view.
func outside(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, raw.Close()) })
	return raw
}

// TestStoreConformance runs the Store suite, the Source suite included,
// written through the Store's own methods. (An undecodable value is in
// TestSourceConformanceWrittenFromOutside: the Store suite's Put reads a
// key with Get first, which fails on a bad value.)
func TestStoreConformance(t *testing.T) {
	sourcetest.RunStore(t, sourcetest.StoreSuite[string, item]{
		New: func(t *testing.T) informer.Store[string, item] {
			return must.Do(sqlitestore.New[item](openDB(t, sqlitestore.Options{Synchronous: sqlitestore.SynchronousNormal}), "items"))
		},
		Expire: func(ctx context.Context, s informer.Store[string, item]) error {
			_, err := s.(*sqlitestore.Store[item]).DB().Compact(ctx, 0)
			return err
		},
		DeletesCarryValue: false,
		Key:               func(i int) string { return "k" + strconv.Itoa(i) },
		Value:             func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}

// TestSourceConformanceWrittenFromOutside runs the Source suite on a
// collection written only by another connection through the objects view,
// as the sqlite3 command line would: good values, and JSON that does not
// decode into the collection's type. Those writes reach the Watch through
// the data_version poll, not the in-process wake-up.
func TestSourceConformanceWrittenFromOutside(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			path := filepath.Join(t.TempDir(), "store.db")
			db := openPath(t, path, sqlitestore.Options{Synchronous: sqlitestore.SynchronousNormal, PollInterval: 5 * time.Millisecond})
			store := must.Do(sqlitestore.New[item](db, "items"))
			raw := outside(t, path)
			putRaw := func(ctx context.Context, key, value string) error {
				_, err := raw.ExecContext(ctx, "INSERT INTO objects (coll, key, value) VALUES ('items', ?, ?)", key, value)
				return err
			}
			return sourcetest.Backend[string, item]{
				Source: store,
				Put: func(ctx context.Context, key string, v item) error {
					data, err := json.Marshal(v)
					if err != nil {
						return err
					}
					return putRaw(ctx, key, string(data))
				},
				PutUndecodable: func(ctx context.Context, key string) error {
					return putRaw(ctx, key, `{"n": "not a number"}`)
				},
				Delete: func(ctx context.Context, key string) error {
					_, err := raw.ExecContext(ctx, "DELETE FROM objects WHERE coll = 'items' AND key = ?", key)
					return err
				},
				Expire: func(ctx context.Context) error {
					_, err := db.Compact(ctx, 0)
					return err
				},
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}
