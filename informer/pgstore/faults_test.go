package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// These tests kill the server or compact the log: they do not run in
// parallel with other tests.

// TestInformerShouldConvergeThroughASessionKillAndAServerCrash: under 4
// typed writers and 2 plain-SQL writers of a followed table, every session
// of the informers' process (reader and LISTEN) is terminated, then the
// server is killed with SIGKILL and restarted. The informers' watches fail
// and resume (the crash skips up to 32 revisions, which the reader fills),
// and both end equal to a SELECT with per-key order kept: nothing lost,
// reordered or resurrected, and a plain Watch beside each emitted exactly
// the log's changes. (Failed with write() and fill() at the server's
// synchronous_commit=off: a change emitted before the crash was gone from
// the log after it.)
func TestInformerShouldConvergeThroughASessionKillAndAServerCrash(t *testing.T) {
	server := testserver.PostgresServer(t)
	h := newHarness(t, nil, nil)
	h.followTable()
	h.start(4, 2)
	h.waitForChanges(10)

	var n int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, informerApp).Scan(&n))
	require.Positive(t, n)
	h.waitForChanges(10)

	server.Kill(t)
	time.Sleep(200 * time.Millisecond) // down for a while, writes failing
	server.Start(t)
	h.waitForChanges(10)

	h.stopAndCheck(true)
	t.Logf("writes %d, rolled back %d, conflicts %d, failures %d, informer stats %+v, %+v",
		h.writes.Load(), h.rollbacks.Load(), h.conflicts.Load(), h.failures.Load(), h.inf.Stats(), h.table.inf.Stats())
	for _, l := range []*lane{h.typed, h.table} {
		st := l.inf.Stats()
		assert.Positive(t, st.WatchErrors, "%s: the watch failed with the sessions", l.name)
		assert.Zero(t, st.Violations, l.name)
	}
}

// TestInformerShouldConvergeWhenOnlyItsReaderSessionIsTerminated: under 2
// typed writers and 2 plain-SQL writers of a followed table, the session
// that ran the reader's poll (found in pg_stat_activity by its statement)
// is terminated, again until both informers' watches have failed with it,
// and nothing else (not the LISTEN session; the failed reader closes it
// and its successor opens another). The informers
// watch again after their last revision and end equal to a SELECT with
// nothing lost or reordered. Both collections get changes before and
// after the kills, however slowly the writers run. (Failed with the reader
// swallowing its error and stopping: no watch error, and the informers
// stuck where it stopped; and, on a loaded machine, with no change of the
// table to check: the test slept a fixed 200 + 300 ms for the writers.)
func TestInformerShouldConvergeWhenOnlyItsReaderSessionIsTerminated(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.followTable()
	listen := listenerOf(t, h)
	read := pgstore.ReaderQueries(h.db)["read"]
	h.start(2, 2)
	h.waitForChanges(10)

	killed := 0
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND starts_with(query, $2) AND pid <> $3`, informerApp, read[:60], listen).Scan(&n))
		killed += n
		return h.typed.inf.Stats().WatchErrors > 0 && h.table.inf.Stats().WatchErrors > 0
	}, 10*time.Second, 20*time.Millisecond, "both watches failed with the reader's session")
	h.waitForChanges(10) // writes after the kill

	h.stopAndCheck(true)
	t.Logf("sessions terminated %d, writes %d, rolled back %d, informer stats %+v, %+v",
		killed, h.writes.Load(), h.rollbacks.Load(), h.inf.Stats(), h.table.inf.Stats())
	for _, l := range []*lane{h.typed, h.table} {
		assert.Zero(t, l.inf.Stats().Violations, l.name)
	}
}

// TestInformerShouldConvergeWhenOnlyItsListenSessionIsTerminated: the
// informers' DB polls once an hour while LISTEN is up, so what it gets it
// gets through NOTIFY, or through the fast poll while LISTEN is down. Under
// 2 typed writers and 2 plain-SQL writers of a followed table, its LISTEN
// session alone is terminated three times, the writers stopping right
// after the last (their last NOTIFYs lost). No watch fails, LISTEN comes
// back on a new session each time, and the informers end equal to a
// SELECT with nothing lost or reordered. (Failed with the reader not woken
// when LISTEN drops or comes back: it slept out its hour-long poll, the
// informers stuck behind the table.)
func TestInformerShouldConvergeWhenOnlyItsListenSessionIsTerminated(t *testing.T) {
	h := newHarness(t, []pgstore.DBOption{pgstore.WithPollInterval(hour)}, nil)
	h.followTable()
	listen := listenerOf(t, h)
	h.start(2, 2)
	for round := range 3 {
		h.waitForChanges(10)
		var ok bool
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, listen).Scan(&ok))
		require.True(t, ok)
		if round == 2 {
			break
		}
		was := listen
		require.Eventually(t, func() bool {
			p := listeners(t, h.pool, h.schema)
			if len(p) == 1 && p[0] != was {
				listen = p[0]
			}
			return listen != was
		}, 10*time.Second, 5*time.Millisecond, "LISTEN is back on a new session")
	}
	h.stopAndCheck(true)
	t.Logf("writes %d, rolled back %d, informer stats %+v, %+v", h.writes.Load(), h.rollbacks.Load(), h.inf.Stats(), h.table.inf.Stats())
	for _, l := range []*lane{h.typed, h.table} {
		assert.Zero(t, l.inf.Stats().WatchErrors, "%s: a lost LISTEN session ends no watch", l.name)
		assert.Zero(t, l.inf.Stats().Violations, l.name)
	}
}

// listenerOf waits until the informers' DB LISTENs on one session and
// returns its backend pid.
func listenerOf(t *testing.T, h *harness) int32 {
	t.Helper()
	var p []int32
	require.Eventually(t, func() bool {
		p = listeners(t, h.pool, h.schema)
		return len(p) == 1
	}, 10*time.Second, 5*time.Millisecond, "one LISTEN session")
	return p[0]
}

// gated is a Source whose Watch holds every event while held is set.
type gated struct {
	*pgstore.Store[item]
	held atomic.Pointer[chan struct{}]
}

func (g *gated) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, item]) error) error {
	return g.Store.Watch(ctx, after, func(e informer.Event[string, item]) error {
		if ch := g.held.Load(); ch != nil {
			select {
			case <-*ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return emit(e)
	})
}

// TestInformerBehindACompactionShouldExpireAndRelist: the informer's
// watch is held while 200 changes (deletes among them) are written and
// another process compacts the whole log; released, it overflows its
// buffer of 4, finds its position compacted (ErrRevisionExpired), relists,
// and ends equal to a List, no deleted key resurrected. (Failed when the
// catch-up read did not check the compaction revision: the informer went
// on from the compacted log and kept deleted keys.)
func TestInformerBehindACompactionShouldExpireAndRelist(t *testing.T) {
	var g *gated
	h := newHarness(t, []pgstore.DBOption{pgstore.WithBuffer(4), pgstore.WithBatch(16)},
		func(s *pgstore.Store[item]) informer.Source[string, item] { g = &gated{Store: s}; return g })
	other := must.Do(pgstore.New[item](newDB(t, h.pool, h.schema), h.coll))
	for i := range 40 {
		_, err := other.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.inf.Len() == 40 }, 10*time.Second, 5*time.Millisecond)

	gate := make(chan struct{})
	g.held.Store(&gate)
	churn(t, other, 200)
	c, err := other.Compact(t.Context(), 0)
	require.NoError(t, err)
	t.Logf("compacted at %d", c)
	g.held.Store(nil)
	close(gate)

	require.Eventually(t, func() bool { return h.inf.Stats().Expired > 0 }, 10*time.Second, 5*time.Millisecond)
	h.writes.Add(1) // stopAndCheck wants writes; these were the test's own
	h.stopAndCheck(false)
	t.Logf("informer stats %+v", h.inf.Stats())
}

// churn makes n changes through s to the 40 keys key(0)…key(39): a create
// where the key is absent, else every third a delete, else an update.
func churn(t *testing.T, s *pgstore.Store[item], n int) {
	t.Helper()
	for i := range n {
		k := key(i % 40)
		_, rev, ok, err := s.Get(t.Context(), k)
		require.NoError(t, err)
		switch {
		case !ok:
			_, err = s.Create(t.Context(), k, item{N: 1000 + i})
		case i%3 == 0:
			_, err = s.Delete(t.Context(), k, rev)
		default:
			_, err = s.Update(t.Context(), k, item{N: 1000 + i}, rev)
		}
		require.NoError(t, err)
	}
}

func key(i int) string { return "k" + string(rune('A'+i)) }
