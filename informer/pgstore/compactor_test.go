package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// TestBackgroundCompactorShouldCompactToItsWatermarkAndExpireAWatchBehindIt:
// a DB compacting every 5 ms keeping 10 revisions serves an informer whose
// Watch is held while 200 changes are written. The compactor moves the
// compaction revision past the informer (without anyone calling Compact),
// never past the watermark: every revision in the last 10 stays in the log,
// and so does the newest value of every live key. Released, the informer's
// watch expires, it relists and ends equal to a List. (Failed with the
// compactor ignoring keep: the watermark assertion; and with the compactor
// not started: the compaction revision never moved.)
func TestBackgroundCompactorShouldCompactToItsWatermarkAndExpireAWatchBehindIt(t *testing.T) {
	const keep = 10
	var g *gated
	h := newHarness(t, []pgstore.DBOption{pgstore.WithCompaction(5*time.Millisecond, keep), pgstore.WithBuffer(4), pgstore.WithBatch(16)},
		func(s *pgstore.Store[item]) informer.Source[string, item] { g = &gated{Store: s}; return g })
	other := must.Do(pgstore.New[item](newDB(t, h.pool, h.schema), h.coll))
	for i := range 40 {
		_, err := other.Create(t.Context(), key(i), item{N: i})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.inf.Len() == 40 }, 10*time.Second, 5*time.Millisecond)

	gate := make(chan struct{})
	g.held.Store(&gate)
	var held int64 // the newest revision before the informer was held
	schema := pgx.Identifier{h.schema}.Sanitize()
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT max(rev) FROM `+schema+`.log`).Scan(&held))
	churn(t, other, 200)
	var top int64
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT max(rev) FROM `+schema+`.log`).Scan(&top))

	// The informer's DB reads on (its held Watch left the shared stream), so
	// its compactor's watermark reaches top - keep.
	var compacted, kept, live, heads int64
	require.Eventually(t, func() bool {
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT compact_rev FROM `+schema+`.meta`).Scan(&compacted))
		return compacted >= top-keep
	}, 10*time.Second, 5*time.Millisecond, "the compactor never reached its watermark")
	require.Equal(t, top-keep, compacted, "compacted to the watermark, never past it")
	require.Greater(t, compacted, held, "compacted past the held informer")
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.log WHERE rev > $1`, compacted).Scan(&kept))
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT DISTINCT ON (key) op FROM `+schema+
		`.log WHERE coll = $1 ORDER BY key, rev DESC) x WHERE op = 'p'`, h.coll).Scan(&live))
	assert.Equal(t, int64(keep), kept, "every revision above the watermark stays")
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.head WHERE coll = $1`, h.coll).Scan(&heads))
	assert.Equal(t, heads, live, "every live key keeps a value")

	g.held.Store(nil)
	close(gate)
	require.Eventually(t, func() bool { return h.inf.Stats().Expired > 0 }, 10*time.Second, 5*time.Millisecond)
	h.writes.Add(1) // stopAndCheck wants writes; these were the test's own
	h.stopAndCheck(false)
	assert.Len(t, h.inf.List(), int(heads))
}
