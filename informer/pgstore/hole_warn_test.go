package pgstore_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// at returns the attributes of every record at level, by key.
func (r *records) at(level slog.Level) []map[string]slog.Value {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]slog.Value
	for _, rec := range r.recs {
		if rec.Level != level {
			continue
		}
		attrs := map[string]slog.Value{"msg": slog.StringValue(rec.Message)}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		out = append(out, attrs)
	}
	return out
}

// TestAHoleOpenLongerThanTheThresholdShouldBeLoggedOnceWithItsSession: a
// session takes a revision and stays idle in its transaction; a later
// change makes it a hole, and the reader's fill waits for it. Past the
// threshold (a second; 20 ms here) the DB logs one warning with the hole's
// revision, how long it has been open and the session it waits for (its
// pid), and once the transaction ends, that the Watches go on. (Failed
// before: nothing was logged, the Watches waited in silence.)
func TestAHoleOpenLongerThanTheThresholdShouldBeLoggedOnceWithItsSession(t *testing.T) {
	defer pgstore.SetHoleWarnAfter(20 * time.Millisecond)()
	pool := newPool(t)
	schema := newSchema(t, pool)
	log := &records{}
	db := newDB(t, pool, schema, pgstore.WithLogger(slog.New(log)))
	coll := newColl()
	s := must.Do(pgstore.New[item](db, coll))
	_, after, err := s.List(t.Context())
	require.NoError(t, err)
	events := watchEvents(t, s, after, 10)

	tx, slow := openSlowWrite(t, pool, schema, coll)
	var pid int64
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = s.Create(t.Context(), "fast", item{N: 2})
	require.NoError(t, err)
	waitForFill(t, pool, "the Watch")

	require.Eventually(t, func() bool { return len(log.at(slog.LevelWarn)) > 0 }, 10*time.Second, time.Millisecond,
		"no warning about the open transaction")
	w := log.at(slog.LevelWarn)[0]
	assert.Contains(t, w["msg"].String(), "idle_in_transaction_session_timeout")
	assert.Equal(t, slow, w["revision"].Int64(), "the hole's revision")
	assert.GreaterOrEqual(t, w["open_for"].Duration(), 20*time.Millisecond)
	assert.Contains(t, w["sessions"].String(), "pid "+strconv.FormatInt(pid, 10)+" ", "the session the fill waits for")
	assert.Contains(t, w["sessions"].String(), "idle in transaction")

	require.NoError(t, tx.Commit(t.Context()))
	for range 2 {
		select {
		case <-events:
		case <-time.After(10 * time.Second):
			t.Fatal("the Watch did not go on after the commit")
		}
	}
	assert.Len(t, log.at(slog.LevelWarn), 1, "one warning per hole")
	if infos := log.at(slog.LevelInfo); assert.Len(t, infos, 1) {
		assert.Equal(t, slow, infos[0]["revision"].Int64())
	}
}
