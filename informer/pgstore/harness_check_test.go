package pgstore_test

import (
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"time"

	"github.com/converge-go/converge/informer"
)

// stopAndCheck stops the writers and checks every lane of the harness:
// the informer's cache ends equal to the collection as SQL reads it (the
// typed collection's head joined to the log; the followed table itself),
// and, when history is kept (not after a compaction), the recording Watch
// emitted every change of the log after its start, once and in revision
// order, and per key the handler was told of changes in revision order,
// each a committed put of the value it was given or a committed delete.
func (h *harness) stopAndCheck(history bool) {
	t := h.t
	t.Helper()
	if h.stop != nil {
		h.stop()
	}
	h.writers.Wait()
	require.Positive(t, h.writes.Load())
	for _, l := range []*lane{h.typed, h.table} {
		if l != nil {
			h.check(l, history)
		}
	}
}

func (h *harness) check(l *lane, history bool) {
	t := h.t
	t.Helper()
	// A write whose client gave up (cancelled) may still commit on the
	// server a moment later, and the server may be coming back: read the
	// table again until equal.
	var want map[string]item
	cache := func() map[string]item {
		m := make(map[string]item)
		for _, e := range l.inf.List() {
			m[e.Key] = e.Value
		}
		return m
	}
	if !assert.Eventually(t, func() bool {
		got, err := l.want(t.Context())
		if err != nil {
			return false
		}
		want = got
		return assert.ObjectsAreEqual(want, cache())
	}, 20*time.Second, 10*time.Millisecond) {
		assert.Equal(t, want, cache(), "%s: the informer's cache vs SELECT", l.name)
	}
	if !history {
		return
	}
	s := pgx.Identifier{h.schema}.Sanitize()
	// Every committed change reached the recording Watch, once, in order.
	var logged []int64
	recorded := func() []int64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.Clone(l.watched)
	}
	if !assert.Eventually(t, func() bool {
		rows, err := h.pool.Query(t.Context(), `SELECT rev FROM `+s+`.log WHERE coll = $1 AND rev > $2 ORDER BY rev`, l.coll, l.from)
		require.NoError(t, err)
		logged, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return slices.Equal(logged, recorded())
	}, 20*time.Second, 10*time.Millisecond) {
		got := recorded()
		assert.True(t, slices.IsSorted(got) && len(slices.Compact(slices.Clone(got))) == len(got),
			"%s: the Watch emitted revisions out of order or twice", l.name)
		emitted := make(map[int64]bool)
		for _, r := range got {
			emitted[r] = true
		}
		for _, r := range logged {
			assert.True(t, emitted[r], "%s: change at revision %d never emitted", l.name, r)
			delete(emitted, r)
		}
		assert.Empty(t, slices.Sorted(maps.Keys(emitted)), "%s: emitted revisions that are no change of the collection", l.name)
	}
	require.NotEmpty(t, logged, "%s: no change to check", l.name)

	// The log's changes of the collection: the revision of every value
	// (each written once), and per key the revisions of its deletes.
	revOf := make(map[int]int64)
	dels := make(map[string][]int64)
	rows, err := h.pool.Query(t.Context(), `SELECT rev, key, op, value FROM `+s+`.log WHERE coll = $1 ORDER BY rev`, l.coll)
	require.NoError(t, err)
	var (
		rev  int64
		key  string
		op   string
		data []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&rev, &key, &op, &data}, func() error {
		if op == "d" {
			dels[key] = append(dels[key], rev)
			return nil
		}
		v, err := informer.JSON[item]{}.Unmarshal(data)
		revOf[v.N] = rev
		return err
	})
	require.NoError(t, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, cs := range l.seen {
		var last int64 // the revision of the last change the handler was told of
		for _, c := range cs {
			if !assert.Greater(t, c.rev, last, "%s: key %s: told of a change at %d after one at %d", l.name, k, c.rev, last) {
				return
			}
			last = c.rev
			vrev, ok := revOf[c.n]
			if !assert.True(t, ok, "%s: key %s: value %d was never committed", l.name, k, c.n) {
				return
			}
			switch {
			case c.del:
				_, found := slices.BinarySearch(dels[k], c.rev)
				assert.True(t, found, "%s: key %s: told of a delete at %d, which is no committed delete of the key", l.name, k, c.rev)
				assert.Less(t, vrev, c.rev, "%s: key %s: deleted at %d with a last value committed at %d", l.name, k, c.rev, vrev)
			case c.list:
				assert.LessOrEqual(t, vrev, c.rev, "%s: key %s: listed at %d with a value committed at %d", l.name, k, c.rev, vrev)
			default:
				assert.Equal(t, vrev, c.rev, "%s: key %s: told of value %d at %d, committed at %d", l.name, k, c.n, c.rev, vrev)
			}
		}
	}
}

// waitForChanges waits until the log holds n changes of every lane's
// collection committed after the call: a test's precondition that the
// writers wrote around a fault, whatever their speed (a loaded machine
// runs them slowly; a fixed sleep then leaves a lane with nothing to
// check).
func (h *harness) waitForChanges(n int) {
	t := h.t
	t.Helper()
	s := pgx.Identifier{h.schema}.Sanitize()
	var after int64
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT coalesce(max(rev), 0) FROM `+s+`.log`).Scan(&after))
	for _, l := range []*lane{h.typed, h.table} {
		if l == nil {
			continue
		}
		require.Eventually(t, func() bool {
			var got int
			err := h.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s+`.log WHERE coll = $1 AND rev > $2`, l.coll, after).Scan(&got)
			return err == nil && got >= n
		}, time.Minute, 10*time.Millisecond, "%s: %d changes committed", l.name, n)
	}
}
