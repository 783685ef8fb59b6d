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
	"github.com/converge-go/converge/internal/testserver"
)

// These tests kill the server or compact the log: they do not run in
// parallel with other tests.

// TestInformerShouldConvergeThroughASessionKillAndAServerCrash: under 6
// writers, every session of the informer's process (reader and LISTEN) is
// terminated, then the server is killed with SIGKILL and restarted. The
// informer's watches fail and resume (the crash skips up to 32 revisions,
// which the reader fills), and it ends equal to a List with per-key order
// kept: nothing lost, reordered or resurrected, and a plain Watch beside
// it emitted exactly the log's changes. (Failed with write() and fill() at
// the server's synchronous_commit=off: a change emitted before the crash
// was gone from the log after it.)
func TestInformerShouldConvergeThroughASessionKillAndAServerCrash(t *testing.T) {
	server := testserver.PostgresServer(t)
	h := newHarness(t, nil, nil)
	h.start(4, 2, 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)

	var n int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, informerApp).Scan(&n))
	require.Positive(t, n)
	time.Sleep(300 * time.Millisecond)

	server.Kill(t)
	time.Sleep(200 * time.Millisecond)
	server.Start(t)
	time.Sleep(500 * time.Millisecond)

	h.stopAndCheck(true)
	st := h.inf.Stats()
	t.Logf("writes %d, conflicts %d, failures %d, informer stats %+v", h.writes.Load(), h.conflicts.Load(), h.failures.Load(), st)
	assert.Positive(t, st.WatchErrors, "the watch failed with the sessions")
	assert.Zero(t, st.Violations)
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
	other := pgstore.New[item](newDB(t, h.pool, h.schema), h.coll)
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
