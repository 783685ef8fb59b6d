package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInformersShouldEqualTheTablesAfterEightMixedWriters: 4 writers
// through the typed client and 4 with plain SQL on a followed table of
// the same schema (one log), for 4.2 s: a quarter of the SQL transactions
// rolled back, and three held open 2-3 s (two committed, one rolled back),
// so every change behind them waits. The two informers (another process,
// one DB) end equal to a SELECT of the table and of the typed collection's
// head joined to the log; per key their handlers were told only committed
// values, each newer than the change before it; and a plain Watch of each
// collection emitted every change of the log, once, in revision order.
// (Failed when the reader skipped holes instead of filling them: changes
// behind the held transactions never emitted, the cache behind the table.)
func TestInformersShouldEqualTheTablesAfterEightMixedWriters(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.followTable()
	h.start(4, 4,
		held{writer: 0, at: 300 * time.Millisecond, hold: 2500 * time.Millisecond, commit: true},
		held{writer: 1, at: 800 * time.Millisecond, hold: 2 * time.Second},
		held{writer: 2, at: 1200 * time.Millisecond, hold: 3 * time.Second, commit: true})
	time.Sleep(4200 * time.Millisecond)
	h.stopAndCheck(true)
	t.Logf("writes %d, rolled back %d, conflicts %d, failures (cancelled at the end) %d; typed informer %+v; table informer %+v",
		h.writes.Load(), h.rollbacks.Load(), h.conflicts.Load(), h.failures.Load(), h.inf.Stats(), h.table.inf.Stats())
	assert.EqualValues(t, 3, h.heldDone.Load(), "the held transactions ended as planned")
	require.Greater(t, h.writes.Load(), int64(100), "too few writes to matter")
	assert.Positive(t, h.rollbacks.Load())
}
