package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/informer/sourcetest"
	"github.com/converge-go/converge/internal/must"
)

// newTable creates a plain user table (id text primary key, n, s) in
// schema (dropped with it) and returns its qualified name and a fresh
// collection name for it.
func newTable(t *testing.T, pool *pgxpool.Pool, schema string) (table, coll string) {
	t.Helper()
	coll = newColl()
	table = pgx.Identifier{schema, "w_" + coll}.Sanitize()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+table+` (id text PRIMARY KEY, n int NOT NULL, s text)`)
	require.NoError(t, err)
	return table, coll
}

// upsert writes v to key of table with one plain statement.
func upsert(ctx context.Context, pool *pgxpool.Pool, table, key string, v item) error {
	_, err := pool.Exec(ctx, `INSERT INTO `+table+` (id, n, s) VALUES ($1, $2, nullif($3, ''))
		ON CONFLICT (id) DO UPDATE SET n = excluded.n, s = excluded.s`, key, v.N, v.S)
	return err
}

// TestTableSourceConformance runs the Source suite on a followed table
// written only by plain SQL, from a pool other than the DB's (another
// process: its Watches are woken by the trigger's NOTIFY). Its s column is
// jsonb, so that a row can hold what item cannot decode
// (Backend.PutUndecodable: a number where a string is expected).
func TestTableSourceConformance(t *testing.T) {
	pool, writer := newPool(t), newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	compactor := must.Do(pgstore.New[item](db, "compactor"))
	sourcetest.Run(t, sourcetest.Suite[string, item]{
		New: func(t *testing.T) sourcetest.Backend[string, item] {
			coll := newColl()
			table := pgx.Identifier{schema, "w_" + coll}.Sanitize()
			_, err := pool.Exec(t.Context(), `CREATE TABLE `+table+` (id text PRIMARY KEY, n int NOT NULL, s jsonb)`)
			require.NoError(t, err)
			require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
			// s is the column's JSON text, nil for NULL.
			upsertJSON := func(ctx context.Context, key string, n int, s any) error {
				_, err := writer.Exec(ctx, `INSERT INTO `+table+` (id, n, s) VALUES ($1, $2, $3)
					ON CONFLICT (id) DO UPDATE SET n = excluded.n, s = excluded.s`, key, n, s)
				return err
			}
			return sourcetest.Backend[string, item]{
				Source: must.Do(pgstore.NewTable[item](db, coll)),
				Put: func(ctx context.Context, key string, v item) error {
					var s any // NULL for ""
					if v.S != "" {
						s = strconv.Quote(v.S)
					}
					return upsertJSON(ctx, key, v.N, s)
				},
				PutUndecodable: func(ctx context.Context, key string) error {
					return upsertJSON(ctx, key, 0, "5")
				},
				Delete: func(ctx context.Context, key string) error {
					_, err := writer.Exec(ctx, `DELETE FROM `+table+` WHERE id = $1`, key)
					return err
				},
				Expire: func(ctx context.Context) error {
					_, err := compactor.Compact(ctx, 0)
					return err
				},
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) item { return item{N: i + 1, S: "v" + strconv.Itoa(i)} },
	})
}

// change is an event without its revision, for comparing sequences.
type change struct {
	typ   informer.EventType
	key   string
	value item
}

// TestTableSourceShouldEmitPlainSQLWritesFromAnotherConnection follows a
// table that already has rows, then writes it with plain SQL from another
// pool: a multi-row UPDATE in one transaction, a rolled-back transaction,
// an UPDATE of a primary key (two changes), a DELETE and a TRUNCATE. The
// Watch emits exactly those changes, in order, and List equals the table.
func TestTableSourceShouldEmitPlainSQLWritesFromAnotherConnection(t *testing.T) {
	pool, writer := newPool(t), newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	table, coll := newTable(t, pool, schema)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := writer.Exec(t.Context(), sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`INSERT INTO ` + table + ` (id, n, s) VALUES ('a', 1, 'x'), ('b', 2, NULL), ('c', 3, 'z')`)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	src := must.Do(pgstore.NewTable[item](db, coll))
	listed, rev, err := src.List(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, []informer.Entry[string, item]{
		{Key: "a", Value: item{N: 1, S: "x"}}, {Key: "b", Value: item{N: 2}}, {Key: "c", Value: item{N: 3, S: "z"}},
	}, withoutRevisions(listed), "the rows present before Follow are copied")

	events := watchEvents(t, src, rev, 100)
	next := func(n int) []informer.Event[string, item] {
		t.Helper()
		var got []informer.Event[string, item]
		for range n {
			select {
			case e := <-events:
				got = append(got, e)
			case <-ctxFor(t, sourcetest.DefaultWait).Done():
				require.FailNow(t, "no event", "got %v so far", got)
			}
		}
		return got
	}
	changes := func(es []informer.Event[string, item]) []change {
		out := make([]change, len(es))
		for i, e := range es {
			out[i] = change{e.Type, e.Key, e.Value}
		}
		return out
	}
	consecutive := func(es []informer.Event[string, item]) {
		t.Helper()
		for i := 1; i < len(es); i++ {
			assert.Equal(t, es[i-1].Revision+1, es[i].Revision, "one transaction's changes are consecutive")
		}
	}

	// One multi-row UPDATE in an explicit transaction: three changes.
	tx, err := writer.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `UPDATE `+table+` SET n = n + 10`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(t.Context()))
	got := next(3)
	consecutive(got)
	assert.ElementsMatch(t, []change{
		{informer.Put, "a", item{N: 11, S: "x"}}, {informer.Put, "b", item{N: 12}}, {informer.Put, "c", item{N: 13, S: "z"}},
	}, changes(got))

	// A rolled-back transaction emits nothing: the next change is d's.
	tx, err = writer.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `INSERT INTO `+table+` (id, n) VALUES ('never', 0)`)
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `UPDATE `+table+` SET n = 0 WHERE id = 'a'`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(t.Context()))
	exec(`INSERT INTO ` + table + ` (id, n) VALUES ('d', 4)`)
	assert.Equal(t, []change{{informer.Put, "d", item{N: 4}}}, changes(next(1)))

	// An UPDATE of the primary key is a delete of the old key and a put of
	// the new one, in that order, at consecutive revisions.
	exec(`UPDATE ` + table + ` SET id = 'e' WHERE id = 'b'`)
	got = next(2)
	consecutive(got)
	assert.Equal(t, []change{{informer.Delete, "b", item{}}, {informer.Put, "e", item{N: 12}}}, changes(got))

	exec(`DELETE FROM ` + table + ` WHERE id = 'c'`)
	assert.Equal(t, []change{{informer.Delete, "c", item{}}}, changes(next(1)))

	listed, _, err = src.List(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, selectItems(t, writer, table), withoutRevisions(listed), "List equals the table")

	// TRUNCATE deletes every live key.
	exec(`TRUNCATE ` + table)
	got = next(3)
	assert.ElementsMatch(t, []change{{informer.Delete, "a", item{}}, {informer.Delete, "d", item{}}, {informer.Delete, "e", item{}}}, changes(got))
	select {
	case e := <-events:
		assert.Fail(t, "an event too many", "%v", e)
	default:
	}
}

// selectItems reads table as entries.
func selectItems(t *testing.T, pool *pgxpool.Pool, table string) []informer.Entry[string, item] {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT id, n, coalesce(s, '') FROM `+table)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (informer.Entry[string, item], error) {
		var e informer.Entry[string, item]
		err := r.Scan(&e.Key, &e.Value.N, &e.Value.S)
		return e, err
	})
	require.NoError(t, err)
	return out
}

// TestTableSourceShouldKeyByACompositePrimaryKeyAsAJSONArray checks the
// key of a two-column primary key, and a codec given the row's JSON.
func TestTableSourceShouldKeyByACompositePrimaryKeyAsAJSONArray(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	table := pgx.Identifier{schema, "pairs"}.Sanitize()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+table+` (a int, b text, v int, PRIMARY KEY (b, a));
		INSERT INTO `+table+` VALUES (1, 'x', 7)`)
	require.NoError(t, err)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, "pairs"))
	raw := must.Do(pgstore.NewTable[map[string]any](db, "pairs"))
	got, _, err := raw.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []informer.Entry[string, map[string]any]{
		{Key: `["x", 1]`, Value: map[string]any{"a": float64(1), "b": "x", "v": float64(7)}},
	}, withoutRevisions(got))
}

// TestFollowShouldBeIdempotentAndSafeUnderConcurrentCallers runs Follow on
// one table with rows from 6 goroutines at once: every call succeeds, the
// rows are copied once, and the table has one set of triggers. After
// Unfollow, writes are not followed; Follow again copies the table anew,
// a delete included, so List equals the table.
func TestFollowShouldBeIdempotentAndSafeUnderConcurrentCallers(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema)
	table, coll := newTable(t, pool, schema)
	_, err := pool.Exec(t.Context(), `INSERT INTO `+table+` (id, n) SELECT 'r' || g, g FROM generate_series(1, 50) g`)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = pgstore.Follow(t.Context(), pool, schema, table, coll) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	logged := func() (puts, deletes int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE op = 'p'), count(*) FILTER (WHERE op = 'd')
			FROM `+pgx.Identifier{schema}.Sanitize()+`.log WHERE coll = $1`, coll).Scan(&puts, &deletes))
		return puts, deletes
	}
	puts, _ := logged()
	assert.Equal(t, 50, puts, "the rows are copied once")
	var triggers int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::text::regclass`, table).Scan(&triggers))
	assert.Equal(t, 3, triggers)

	require.NoError(t, pgstore.Unfollow(t.Context(), pool, schema, table))
	_, err = pool.Exec(t.Context(), `DELETE FROM `+table+` WHERE id = 'r1'; UPDATE `+table+` SET n = 0 WHERE id = 'r2'`)
	require.NoError(t, err)
	puts, deletes := logged()
	assert.Equal(t, [2]int{50, 0}, [2]int{puts, deletes}, "unfollowed writes are not logged")
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	puts, deletes = logged()
	assert.Equal(t, [2]int{50 + 49, 1}, [2]int{puts, deletes}, "following again copies the table anew")
	listed, _, err := must.Do(pgstore.NewTable[item](db, coll)).List(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, selectItems(t, pool, table), withoutRevisions(listed))
}

// TestFollowShouldRefuseWhatItCannotFollow: no primary key, a deferrable
// one, a table followed already by another collection, a collection that
// follows another table.
func TestFollowShouldRefuseWhatItCannotFollow(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	_, err := pool.Exec(t.Context(), fmt.Sprintf(`CREATE TABLE %s (id int); CREATE TABLE %s (id int PRIMARY KEY DEFERRABLE)`,
		q("nokey"), q("deferred")))
	require.NoError(t, err)
	assert.ErrorContains(t, pgstore.Follow(t.Context(), pool, schema, q("nokey"), "x"), "no primary key")
	assert.ErrorContains(t, pgstore.Follow(t.Context(), pool, schema, q("deferred"), "x"), "DEFERRABLE")
	table, coll := newTable(t, pool, schema)
	other, _ := newTable(t, pool, schema)
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	assert.ErrorContains(t, pgstore.Follow(t.Context(), pool, schema, table, "another"), "already followed")
	assert.ErrorContains(t, pgstore.Follow(t.Context(), pool, schema, other, coll), "already followed")
	assert.ErrorContains(t, pgstore.Follow(t.Context(), pool, "no_such_schema_x", table, coll), "call pgstore.Setup")
}
