package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is the value type the tests store.
type item struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// newPool connects to the test server (skipped without one, failed with
// CONVERGE_INTEGRATION=1) and closes the pool when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testserver.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newSchema sets up a schema unique to t and this run (the server is
// shared across tests, packages and runs) and drops it when t ends.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("cvt_%s_%d", strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())), time.Now().UnixNano())
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	require.NoError(t, pgstore.Setup(t.Context(), pool, name))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	return name
}

var collections atomic.Int64

// newColl returns a collection name no other store of the run uses.
func newColl() string { return fmt.Sprintf("c%d", collections.Add(1)) }

// newDB returns a DB of schema on pool with opts, closed when t ends.
func newDB(t testing.TB, pool *pgxpool.Pool, schema string, opts ...pgstore.DBOption) *pgstore.DB {
	t.Helper()
	db := must.Do(pgstore.NewDB(pool, append([]pgstore.DBOption{pgstore.WithSchema(schema)}, opts...)...))
	t.Cleanup(db.Close)
	return db
}

// watchEvents runs src.Watch after rev until t ends and returns the events
// it emits, bookmarks left out (buffered: n). At t's end the Watch must
// return context.Canceled.
func watchEvents(t *testing.T, src informer.Source[string, item], after informer.Revision, n int) <-chan informer.Event[string, item] {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan informer.Event[string, item], n)
	done := make(chan error, 1)
	go func() {
		done <- src.Watch(ctx, after, func(e informer.Event[string, item]) error {
			if e.Type != informer.Bookmark {
				events <- e
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); assert.ErrorIs(t, <-done, context.Canceled) })
	return events
}

// withoutRevisions returns entries with their Revision cleared, to compare
// a List with values alone.
func withoutRevisions[V any](entries []informer.Entry[string, V]) []informer.Entry[string, V] {
	out := make([]informer.Entry[string, V], len(entries))
	for i, e := range entries {
		e.Revision = 0
		out[i] = e
	}
	return out
}
