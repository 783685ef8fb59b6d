package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// TestContendedWritesShouldTakeNoRevisionTheyDoNotUse: 8 writers update,
// delete and re-create the same 3 keys as fast as they can, with stale
// revisions as often as not; no reader runs, so nothing fills. Every
// revision the sequence handed out is a log row (a waiting or failed
// compare-and-swap took none: a hole would stall every reader for
// FillAfter), every key's head is its latest log row, and the writes that
// returned are exactly the log's changes. (Failed with write()'s update as
// `UPDATE head SET rev = nextval(…)`: values taken before the row lock and
// again after the re-check were holes.)
func TestContendedWritesShouldTakeNoRevisionTheyDoNotUse(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	s := must.Do(pgstore.New[item](newDB(t, pool, schema), coll))
	keys := []string{"a", "b", "c"}

	var (
		mu      sync.Mutex
		written = map[informer.Revision]bool{}
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 60 {
				k := keys[(w+i)%len(keys)]
				_, rev, ok, err := s.Get(t.Context(), k)
				if !assert.NoError(t, err) {
					return
				}
				var r informer.Revision
				switch {
				case !ok:
					r, err = s.Create(t.Context(), k, item{N: i})
				case i%5 == 0:
					r, err = s.Delete(t.Context(), k, rev)
				default:
					r, err = s.Update(t.Context(), k, item{N: i}, rev)
				}
				if errors.Is(err, informer.ErrConflict) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				written[r] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	q := pgx.Identifier{schema}.Sanitize()
	var base, last, rows, holes int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT m.base, r.last_value, count(l.rev),
		count(*) FILTER (WHERE l.rev IS NULL)
		FROM `+q+`.meta m CROSS JOIN `+q+`.rev r
		CROSS JOIN generate_series(m.base, r.last_value) g LEFT JOIN `+q+`.log l ON l.rev = g
		GROUP BY m.base, r.last_value`).Scan(&base, &last, &rows, &holes))
	assert.Zero(t, holes, "revisions %d..%d with no log row", base, last)
	assert.Len(t, written, int(rows), "the writes that returned are the log's rows")
	assert.Greater(t, len(written), 100, "enough writes succeeded to contend")

	for _, k := range keys {
		v, rev, ok, err := s.Get(t.Context(), k)
		require.NoError(t, err)
		var latest int64
		var op string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT rev, op::text FROM `+q+`.log
			WHERE coll = $1 AND key = $2 ORDER BY rev DESC LIMIT 1`, coll, k).Scan(&latest, &op))
		if op == "d" {
			assert.False(t, ok, "key %s deleted last", k)
			continue
		}
		require.True(t, ok, "key %s put last", k)
		assert.Equal(t, informer.Revision(latest), rev, "key %s: head is the latest change", k)
		assert.True(t, written[rev], "key %s: %v at %d was written", k, v, rev)
	}
}

// TestBurstsOfWritesShouldSendNoNotifyWhileNoDBListens: a DB whose writes
// come faster than its NOTIFY round trip still sends none while no DB
// LISTENs. (It failed before a DB's NOTIFY tries were one at a time: two
// tries in flight hold the listeners' lock against each other, and the
// one that fails to take it takes that for a listener and notifies.)
func TestBurstsOfWritesShouldSendNoNotifyWhileNoDBListens(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	pc, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	conn := pc.Hijack()
	defer func() { assert.NoError(t, conn.Close(context.Background())) }()
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	db := newDB(t, pool, schema)
	s := must.Do(pgstore.New[item](db, newColl()))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				_, err := s.Create(t.Context(), fmt.Sprintf("w%d-%d", w, i), item{N: i})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	db.Close() // waits for the NOTIFYs in flight
	_, err = pool.Exec(t.Context(), `SELECT pg_notify($1, $2)`, schema, "mine")
	require.NoError(t, err)
	n, err := conn.WaitForNotification(ctxFor(t, 10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "mine", n.Payload, "no DB listens: no NOTIFY, however the writes overlap")
}

// TestWritesShouldSendNoNotifyWhileNoDBListens: a DB's writes while no DB
// LISTENs on the schema send no NOTIFY (a plain LISTEN session, which holds
// no listeners' lock, hears none: the first it hears is the test's own,
// sent after the DB's notifier has stopped); while another DB's LISTEN
// connection is up, they do. (The first half failed before the notifier
// checked for listeners: the plain session heard the DB's NOTIFY first.)
func TestWritesShouldSendNoNotifyWhileNoDBListens(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	pc, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	conn := pc.Hijack()
	defer func() { assert.NoError(t, conn.Close(context.Background())) }()
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	// first writes through a new DB, closes it (which waits for its NOTIFY
	// in flight), sends a NOTIFY of its own and returns the payload of the
	// first NOTIFY the plain session hears.
	first := func(name string, opts ...pgstore.DBOption) string {
		db := newDB(t, pool, schema, opts...)
		s := must.Do(pgstore.New[item](db, coll))
		for i := range 3 {
			_, err := s.Create(t.Context(), name+strconv.Itoa(i), item{N: i})
			require.NoError(t, err)
		}
		db.Close()
		_, err := pool.Exec(t.Context(), `SELECT pg_notify($1, $2)`, schema, "mine")
		require.NoError(t, err)
		var heard []string
		for len(heard) == 0 || heard[len(heard)-1] != "mine" {
			n, err := conn.WaitForNotification(ctxFor(t, 10*time.Second))
			require.NoError(t, err)
			heard = append(heard, n.Payload)
		}
		return heard[0]
	}
	assert.Equal(t, "mine", first("alone"), "no DB listens: no NOTIFY")

	r := must.Do(pgstore.New[item](newDB(t, pool, schema, pgstore.WithPollInterval(hour)), coll))
	_, rev, err := r.List(t.Context())
	require.NoError(t, err)
	wt := watch(t, r, rev)
	require.Eventually(t, func() bool { return len(listeners(t, pool, schema)) == 2 }, 10*time.Second, 5*time.Millisecond,
		"the watching DB's LISTEN session is up beside the plain one")
	assert.NotEqual(t, "mine", first("heard"), "a DB listens: a NOTIFY per write burst")
	for range 3 {
		wt.next(t)
	}
}
