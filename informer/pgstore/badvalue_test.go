package pgstore_test

import (
	"context"
	"fmt"
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

// writeRaw writes data as key's value in coll with the schema's write
// function, whatever its revision, as psql would: no codec checks it.
func writeRaw(t *testing.T, pool *pgxpool.Pool, schema, coll, key, data string) {
	t.Helper()
	require.NoError(t, putRaw(t.Context(), pool, schema, coll, key, data))
}

// putRaw is writeRaw, returning the error.
func putRaw(ctx context.Context, pool *pgxpool.Pool, schema, coll, key, data string) error {
	s := pgx.Identifier{schema}.Sanitize()
	var rev int64
	err := pool.QueryRow(ctx, `SELECT CASE WHEN EXISTS (SELECT 1 FROM `+s+`.head WHERE coll = $1 AND key = $2)
		THEN `+s+`.write($1, $2, 'u', 0, convert_to($3, 'UTF8'))
		ELSE `+s+`.write($1, $2, 'c', 0, convert_to($3, 'UTF8')) END`, coll, key, data).Scan(&rev)
	if err == nil && rev <= 0 {
		err = fmt.Errorf("write %s/%s: %d (a concurrent writer)", coll, key, rev)
	}
	return err
}

// nextEvent returns the next event from events, failing t after 10 s.
func nextEvent(t *testing.T, events <-chan informer.Event[string, item]) informer.Event[string, item] {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no event within 10 s")
		return informer.Event[string, item]{}
	}
}

// requireBadPut checks that e is key's Put with a *DecodeError of coll at
// e's revision and no value.
func requireBadPut(t *testing.T, e informer.Event[string, item], coll, key string) {
	t.Helper()
	require.Equal(t, informer.Put, e.Type, "%+v", e)
	require.Equal(t, key, e.Key)
	var de *pgstore.DecodeError
	require.ErrorAs(t, e.Err, &de, "%+v", e)
	assert.Equal(t, pgstore.DecodeError{Collection: coll, Key: key, Revision: e.Revision, Err: de.Err}, *de)
	assert.Positive(t, int64(e.Revision))
	assert.Zero(t, e.Value)
}

// requireGoodPut checks that e is key's Put of v without an error.
func requireGoodPut(t *testing.T, e informer.Event[string, item], key string, v item) {
	t.Helper()
	require.Equal(t, informer.Put, e.Type, "%+v", e)
	require.Equal(t, key, e.Key)
	require.NoError(t, e.Err)
	require.Equal(t, v, e.Value)
}

func TestAListReportsEveryUndecodableValueAsItsKeysEntryAndListsEveryOtherKey(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	// Two bad values in different decode chunks.
	writeValues(t, pool, schema, coll, 1700, 2900)
	store := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))

	entries, rev, err := store.List(t.Context())
	require.NoError(t, err)
	require.Len(t, entries, listKeys)
	for i, e := range entries {
		require.Equal(t, fmt.Sprintf("k%05d", i), e.Key)
		require.Positive(t, int64(e.Revision))
		require.LessOrEqual(t, e.Revision, rev)
		if i != 1700 && i != 2900 {
			require.NoError(t, e.Err, "key %s", e.Key)
			require.Equal(t, item{N: i}, e.Value)
			continue
		}
		var de *pgstore.DecodeError
		require.ErrorAs(t, e.Err, &de, "key %s", e.Key)
		assert.Equal(t, pgstore.DecodeError{Collection: coll, Key: e.Key, Revision: e.Revision, Err: de.Err}, *de)
		assert.Zero(t, e.Value)
	}
}

// TestAWatchEmitsAnUndecodableValueAsItsKeysPutWithErrAndGoesOn writes, as
// psql would, a value of the wrong type between good ones, then fixes it:
// a live Watch and one started behind the reader (which catches up on
// queries of its own) emit the bad value as a Put with Err, every later
// change of the collection and of other collections, and the fix; neither
// ends.
func TestAWatchEmitsAnUndecodableValueAsItsKeysPutWithErrAndGoesOn(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll, other := newColl(), newColl()
	db := newDB(t, pool, schema)
	store := must.Do(pgstore.New[item](db, coll))
	otherStore := must.Do(pgstore.New[item](db, other))
	_, from, err := store.List(t.Context())
	require.NoError(t, err)
	live := watchEvents(t, store, from, 16)
	otherLive := watchEvents(t, otherStore, from, 16)

	writeRaw(t, pool, schema, coll, "a", `{"n": 1}`)
	writeRaw(t, pool, schema, coll, "bad", `{"n": "five"}`)
	writeRaw(t, pool, schema, coll, "c", `{"n": 3}`)
	writeRaw(t, pool, schema, other, "o", `{"n": 4}`)
	writeRaw(t, pool, schema, coll, "bad", `{"n": 5}`)

	behind := watchEvents(t, store, from, 16)
	for name, events := range map[string]<-chan informer.Event[string, item]{"live": live, "behind": behind} {
		t.Run(name, func(t *testing.T) {
			requireGoodPut(t, nextEvent(t, events), "a", item{N: 1})
			requireBadPut(t, nextEvent(t, events), coll, "bad")
			requireGoodPut(t, nextEvent(t, events), "c", item{N: 3})
			requireGoodPut(t, nextEvent(t, events), "bad", item{N: 5})
		})
	}
	requireGoodPut(t, nextEvent(t, otherLive), "o", item{N: 4})
}

// TestAFollowedTableWhoseColumnTypeChangesAndRevertsKeepsItsWatchGoing
// changes a followed table's column to a type the rows' Go type cannot
// take, writes a row, and changes it back: the row written meanwhile is a
// Put with Err, and the rows written after it arrive.
func TestAFollowedTableWhoseColumnTypeChangesAndRevertsKeepsItsWatchGoing(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	table := pgx.Identifier{schema, "things"}.Sanitize()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+table+` (name text PRIMARY KEY, n int NOT NULL, s text)`)
	require.NoError(t, err)
	coll := newColl()
	require.NoError(t, pgstore.Follow(t.Context(), pool, schema, table, coll))
	src := must.Do(pgstore.NewTable[item](newDB(t, pool, schema), coll))
	_, from, err := src.List(t.Context())
	require.NoError(t, err)
	events := watchEvents(t, src, from, 16)

	exec := func(sql string) {
		t.Helper()
		_, err := pool.Exec(t.Context(), sql)
		require.NoError(t, err, sql)
	}
	exec(`INSERT INTO ` + table + ` VALUES ('a', 1, 'x')`)
	exec(`ALTER TABLE ` + table + ` ALTER COLUMN n TYPE text`)
	exec(`INSERT INTO ` + table + ` VALUES ('b', 'two', 'y')`)
	exec(`UPDATE ` + table + ` SET n = '2' WHERE name = 'b'`)
	exec(`ALTER TABLE ` + table + ` ALTER COLUMN n TYPE int USING n::int`)
	exec(`UPDATE ` + table + ` SET n = 3 WHERE name = 'b'`)
	exec(`INSERT INTO ` + table + ` VALUES ('c', 4, 'z')`)

	requireGoodPut(t, nextEvent(t, events), "a", item{N: 1, S: "x"})
	requireBadPut(t, nextEvent(t, events), coll, "b")
	requireBadPut(t, nextEvent(t, events), coll, "b") // "2" is a string
	requireGoodPut(t, nextEvent(t, events), "b", item{N: 3, S: "y"})
	requireGoodPut(t, nextEvent(t, events), "c", item{N: 4, S: "z"})

	entries, _, err := src.List(t.Context())
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, e.Err, "key %s", e.Key)
	}
	assert.Len(t, entries, 3)
}

// TestAnInformerKeepsEveryOtherKeyFlowingPastAnUndecodableValueAndTakesItsFix
// is the informer over a Store: after a psql write of a value that does
// not decode, later changes of other keys reach its cache without a watch
// error or a relist, and so does the key's fix.
func TestAnInformerKeepsEveryOtherKeyFlowingPastAnUndecodableValueAndTakesItsFix(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	store := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))
	inf := must.Do(informer.New[string, item]("bad-values", store))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	require.NoError(t, inf.WaitForSync(t.Context()))

	writeRaw(t, pool, schema, coll, "a", `{"n": 1}`)
	writeRaw(t, pool, schema, coll, "bad", `{"spec": {"content": 5}, "n": "x"}`)
	writeRaw(t, pool, schema, coll, "c", `{"n": 3}`)
	has := func(key string, v item) func() bool {
		return func() bool { got, ok := inf.Get(key); return ok && got == v }
	}
	require.Eventually(t, has("c", item{N: 3}), 10*time.Second, time.Millisecond, "a change after the bad value")
	writeRaw(t, pool, schema, coll, "bad", `{"n": 2}`)
	require.Eventually(t, has("bad", item{N: 2}), 10*time.Second, time.Millisecond, "the fix")
	st := inf.Stats()
	assert.Zero(t, st.WatchErrors, "%+v", st)
	assert.EqualValues(t, 1, st.Lists, "%+v", st)
}
