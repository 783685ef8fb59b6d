package informer_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// capturedLog is a slog handler that keeps the records at Warn and above.
type capturedLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capturedLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *capturedLog) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *capturedLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capturedLog) WithGroup(string) slog.Handler      { return c }

func (c *capturedLog) snapshot() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.records)
}

// attr returns r's attribute named key, and whether it has it.
func attr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

// counted is the sum of the "count" attributes of records, plus one for
// each record without one (a line about one key).
func counted(records []slog.Record) int64 {
	var n int64
	for _, r := range records {
		if v, ok := attr(r, "count"); ok {
			n += v.Int64()
		} else {
			n++
		}
	}
	return n
}

func TestManyKeysGoingBadAtOnceShouldLogABoundedNumberOfLinesThatCountThemAll(t *testing.T) {
	const n = 1000
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	logs := &capturedLog{}
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src,
		informer.WithLogger(slog.New(logs)), informer.WithClock(clk)))
	entries := make([]informer.Entry[string, int], n)
	for i := range entries {
		entries[i] = bad(fmt.Sprintf("k%04d", i), 4)
	}
	src.listEntries(5, entries...)
	stop := start(t, inf)
	w := src.nextWatch(t)
	require.NoError(t, inf.WaitForSync(t.Context()))

	assert.Len(t, inf.BadKeys(), n, "BadKeys stays exact")
	assert.Equal(t, uint64(n), inf.Stats().DecodeErrors, "the counter stays exact")
	assert.Equal(t, 1, len(logs.snapshot()), "the first bad value is logged at once, the others are counted")

	// At the end of the interval, by the informer's clock, one line counts
	// the rest and names a few of them.
	require.Eventually(t, func() bool {
		clk.Step(time.Minute)
		return counted(logs.snapshot()) == n
	}, 10*time.Second, time.Millisecond)
	lines := logs.snapshot()
	require.Equal(t, 2, len(lines))
	keys, ok := attr(lines[1], "sample_keys")
	require.True(t, ok, "the summary names some keys: %v", lines[1])
	assert.NotEmpty(t, keys.Any())

	// A run of bad Puts later is logged the same way; what is counted when
	// Run ends is logged before it returns.
	for i := range 100 {
		w.putBad(t, fmt.Sprintf("p%03d", i), informer.Revision(6+i))
	}
	stop()
	lines = logs.snapshot()
	assert.Equal(t, 4, len(lines), "one line at once, one summary when Run ends")
	assert.Equal(t, int64(n+100), counted(lines))
	assert.Len(t, inf.BadKeys(), n+100)
}
