package pgstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// hour is a poll interval no test waits for: a change that arrives came
// through a wake-up (NOTIFY, a local write, a LISTEN reconnect).
const hour = time.Hour

// watcher runs a Watch and collects its non-bookmark events.
type watcher struct {
	events chan informer.Event[string, item]
	done   chan error
	cancel context.CancelFunc
}

// watch starts s.Watch(after) on a goroutine; it is cancelled, and must
// have ended with context.Canceled, when t ends, unless stopped before.
func watch(t *testing.T, s *pgstore.Store[item], after informer.Revision) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watcher{events: make(chan informer.Event[string, item], 10000), done: make(chan error, 1), cancel: cancel}
	go func() {
		w.done <- s.Watch(ctx, after, func(e informer.Event[string, item]) error {
			if e.Type != informer.Bookmark {
				w.events <- e
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-w.done, context.Canceled)
	})
	return w
}

// next returns the next event, failing t after 10 s or if the Watch ends.
func (w *watcher) next(t *testing.T) informer.Event[string, item] {
	t.Helper()
	select {
	case e := <-w.events:
		return e
	case err := <-w.done:
		w.done <- err
		t.Fatalf("the watch ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return informer.Event[string, item]{}
}

// listeners returns the backend pids of the sessions LISTENing on schema.
func listeners(t *testing.T, pool *pgxpool.Pool, schema string) []int32 {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT pid FROM pg_stat_activity WHERE query = $1 ORDER BY pid`,
		"LISTEN "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}

// twoProcesses sets up a schema with two DBs on it, as two processes
// would have: a Store of the writing one, and a Watch, from a List, on the
// same collection through the watching one.
func twoProcesses(t *testing.T, watchOpts, writeOpts []pgstore.DBOption) (*pgxpool.Pool, string, *pgstore.Store[item], *watcher) {
	t.Helper()
	pool := newPool(t)
	schema := newSchema(t, pool)
	coll := newColl()
	r := must.Do(pgstore.New[item](newDB(t, pool, schema, watchOpts...), coll))
	w := must.Do(pgstore.New[item](newDB(t, pool, schema, writeOpts...), coll))
	_, rev, err := r.List(t.Context())
	require.NoError(t, err)
	return pool, schema, w, watch(t, r, rev)
}

// countingPool is a pool whose read queries (the reader's polls and the
// catch-up reads: the only ones with LATERAL) are counted.
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testserver.Postgres(t))
	require.NoError(t, err)
	n := new(atomic.Int64)
	cfg.ConnConfig.Tracer = tracer{n}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, n
}

type tracer struct{ n *atomic.Int64 }

func (tr tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "LATERAL") {
		tr.n.Add(1)
	}
	return ctx
}

func (tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestDBShouldServeManyWatchesWithOneReaderAndOneListenConnection: 24
// Watches on 4 collections of one DB get every change of their collection,
// in order, while the DB holds one LISTEN session and polls about once per
// fast poll interval, not once per Watch. (Failed with a reader per Watch:
// 24 LISTEN sessions, ~24x the polls.)
func TestDBShouldServeManyWatchesWithOneReaderAndOneListenConnection(t *testing.T) {
	pool, polls := countingPool(t)
	schema := newSchema(t, pool)
	// While LISTEN is up it would poll once an hour: force polling at the
	// fast interval to count polls, then check LISTEN separately.
	db := newDB(t, pool, schema, pgstore.WithPollOnly(), pgstore.WithFastPollInterval(10*time.Millisecond))
	stores := make([]*pgstore.Store[item], 4)
	var ws [][]*watcher
	for i := range stores {
		stores[i] = must.Do(pgstore.New[item](db, newColl()))
		_, rev, err := stores[i].List(t.Context())
		require.NoError(t, err)
		var col []*watcher
		for range 6 {
			col = append(col, watch(t, stores[i], rev))
		}
		ws = append(ws, col)
	}
	// Every Watch joined: one write reaches them all.
	for i, s := range stores {
		_, err := s.Create(t.Context(), "k", item{N: i})
		require.NoError(t, err)
	}
	for i := range stores {
		for _, w := range ws[i] {
			e := w.next(t)
			assert.Equal(t, item{N: i}, e.Value)
		}
	}

	before, start := polls.Load(), time.Now()
	time.Sleep(300 * time.Millisecond) // idle: only the poll loop runs
	n, elapsed := polls.Load()-before, time.Since(start)
	max := int64(2*elapsed/(10*time.Millisecond)) + 5
	t.Logf("%d polls in %v with 24 watches", n, elapsed)
	assert.LessOrEqual(t, n, max, "the Watches poll on their own")
	assert.Positive(t, n)

	// Ordered delivery to all of them.
	for r := range 20 {
		for i, s := range stores {
			_, err := s.Delete(t.Context(), "k", 0)
			require.NoError(t, err)
			_, err = s.Create(t.Context(), "k", item{N: 100*r + i})
			require.NoError(t, err)
		}
	}
	for i := range stores {
		for _, w := range ws[i] {
			var last informer.Revision
			for r := range 20 {
				d, p := w.next(t), w.next(t)
				assert.Equal(t, informer.Delete, d.Type)
				assert.Equal(t, item{N: 100*r + i}, p.Value)
				assert.Greater(t, d.Revision, last)
				assert.Greater(t, p.Revision, d.Revision)
				last = p.Revision
			}
		}
	}

	listening := newDB(t, pool, schema, pgstore.WithPollInterval(hour))
	s := must.Do(pgstore.New[item](listening, stores[0].Collection()))
	_, rev, err := s.List(t.Context())
	require.NoError(t, err)
	for range 10 {
		watch(t, s, rev)
	}
	require.Eventually(t, func() bool { return len(listeners(t, pool, schema)) == 1 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, listeners(t, pool, schema), 1, "10 watches, one LISTEN session")
}

// TestWatchShouldHearAnotherProcessWriteThroughNotify: two DBs stand for
// two processes. The watching one polls once an hour, so the change can
// only arrive through the writer's NOTIFY. (Failed with
// WithNotifyInterval(-1) on the writer: no event within 10 s.)
func TestWatchShouldHearAnotherProcessWriteThroughNotify(t *testing.T) {
	pool, schema, w, wt := twoProcesses(t, []pgstore.DBOption{pgstore.WithPollInterval(hour)}, nil)
	require.Eventually(t, func() bool { return len(listeners(t, pool, schema)) == 1 }, 10*time.Second, 5*time.Millisecond)
	for i := range 5 {
		written, err := w.Create(t.Context(), "k"+string(rune('a'+i)), item{N: i})
		require.NoError(t, err)
		e := wt.next(t)
		assert.Equal(t, written, e.Revision)
	}
}

// TestWatchShouldDeliverEverythingWhenItsListenSessionIsTerminated kills
// the LISTEN session with pg_terminate_backend while another process
// writes: the Watch does not end, the reader polls fast until LISTEN is
// back, then NOTIFY works again. (Failed when the reader kept its hour-long
// poll after losing LISTEN and was not woken on reconnect: no event.)
func TestWatchShouldDeliverEverythingWhenItsListenSessionIsTerminated(t *testing.T) {
	pool, schema, w, wt := twoProcesses(t, []pgstore.DBOption{pgstore.WithPollInterval(hour)}, nil)
	var pid int32
	require.Eventually(t, func() bool {
		p := listeners(t, pool, schema)
		if len(p) == 1 {
			pid = p[0]
		}
		return len(p) == 1
	}, 10*time.Second, 5*time.Millisecond)

	for round := range 3 {
		var ok bool
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
		require.True(t, ok)
		// Written while the session is down or coming back: NOTIFYs lost.
		var want []informer.Revision
		for i := range 5 {
			rv, err := w.Create(t.Context(), "r"+string(rune('0'+round))+string(rune('a'+i)), item{N: i})
			require.NoError(t, err)
			want = append(want, rv)
		}
		for _, rv := range want {
			assert.Equal(t, rv, wt.next(t).Revision)
		}
		require.Eventually(t, func() bool {
			p := listeners(t, pool, schema)
			if len(p) == 1 && p[0] != pid {
				pid = p[0]
				return true
			}
			return false
		}, 10*time.Second, 5*time.Millisecond, "LISTEN is back on a new session")
		// Back: NOTIFY wakes it (the poll interval is an hour).
		time.Sleep(20 * time.Millisecond) // past the reconnect's own wake-up
		rv, err := w.Create(t.Context(), "after"+string(rune('0'+round)), item{N: 9})
		require.NoError(t, err)
		assert.Equal(t, rv, wt.next(t).Revision)
	}
}

// TestPollOnlyShouldNeedNoListenSession: WithPollOnly holds no LISTEN
// session and still sees another process's writes within its fast poll.
func TestPollOnlyShouldNeedNoListenSession(t *testing.T) {
	pool, schema, w, wt := twoProcesses(t, []pgstore.DBOption{pgstore.WithPollOnly()},
		[]pgstore.DBOption{pgstore.WithNotifyInterval(-1)})
	written, err := w.Create(t.Context(), "k", item{N: 1})
	require.NoError(t, err)
	assert.Equal(t, written, wt.next(t).Revision)
	assert.Empty(t, listeners(t, pool, schema))
}

// TestASlowWatchShouldCatchUpAloneAndMissNothing: a Watch whose emit is
// blocked overflows its buffer of 4 and leaves the shared stream; released,
// it reads the rest on its own and then joins again, in order, nothing
// missed, while another Watch on the DB is not held up. (Failed when the
// overflowing rows were dropped without leaving the stream: revisions
// skipped.)
func TestASlowWatchShouldCatchUpAloneAndMissNothing(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	db := newDB(t, pool, schema, pgstore.WithBuffer(4), pgstore.WithBatch(7))
	s := must.Do(pgstore.New[item](db, newColl()))
	_, rev, err := s.List(t.Context())
	require.NoError(t, err)
	fast := watch(t, s, rev)

	gate := make(chan struct{})
	slow := make(chan informer.Event[string, item], 1000)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, rev, func(e informer.Event[string, item]) error {
			<-gate
			if e.Type != informer.Bookmark {
				slow <- e
			}
			return nil
		})
	}()
	defer func() { cancel(); assert.ErrorIs(t, <-done, context.Canceled) }()
	var want []informer.Revision
	for i := range 50 {
		rv, err := s.Create(t.Context(), "k"+string(rune('A'+i)), item{N: i})
		require.NoError(t, err)
		want = append(want, rv)
		assert.Equal(t, rv, fast.next(t).Revision, "the fast watch waits for the slow one")
	}
	close(gate)
	for i := 50; i < 60; i++ {
		rv, err := s.Create(t.Context(), "k"+string(rune('A'+i)), item{N: i})
		require.NoError(t, err)
		want = append(want, rv)
		assert.Equal(t, rv, fast.next(t).Revision)
	}
	sw := &watcher{events: slow, done: done}
	for _, rv := range want {
		assert.Equal(t, rv, sw.next(t).Revision)
	}
}
