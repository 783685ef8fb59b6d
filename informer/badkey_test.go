package informer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// errUndecodable stands for a value the Source could not decode.
var errUndecodable = errors.New("json: cannot unmarshal number into Go struct field spec.content of type string")

// listEntries queues a list reply of exactly these entries.
func (s *script) listEntries(rev informer.Revision, entries ...informer.Entry[string, int]) {
	s.lists <- listReply{entries: entries, rev: rev}
}

// putBad emits a Put whose value could not be decoded, and returns once
// the informer has applied it.
func (c *watchCall) putBad(t *testing.T, key string, rev informer.Revision) {
	t.Helper()
	c.send(t, informer.Event[string, int]{Type: informer.Put, Key: key, Revision: rev, Err: errUndecodable})
}

func good(key string, v int) informer.Entry[string, int] {
	return informer.Entry[string, int]{Key: key, Value: v}
}

func bad(key string, rev informer.Revision) informer.Entry[string, int] {
	return informer.Entry[string, int]{Key: key, Revision: rev, Err: errUndecodable}
}

// badKeys returns the informer's bad keys as "key@revision", with
// "+value" if the cache keeps a good value, sorted.
func badKeys(inf *informer.Informer[string, int]) []string {
	var out []string
	for _, b := range inf.BadKeys() {
		s := fmt.Sprintf("%s@%d", b.Key, b.Revision)
		if b.HasValue {
			s += "+value"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func TestABadValueInTheInitialListShouldMarkItsKeyBadAndCacheEveryOtherKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithClock(clk)))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.listEntries(5, good("a", 1), bad("b", 4), good("c", 3))
	start(t, inf)
	w := src.nextWatch(t)

	assert.Equal(t, map[string]int{"a": 1, "c": 3}, cacheMap(inf))
	_, ok := inf.Get("b")
	assert.False(t, ok, "b never had a good value")
	b, ok := inf.BadKey("b")
	require.True(t, ok, "b is bad")
	assert.Equal(t, informer.BadKey[string]{Key: "b", Revision: 4, Err: errUndecodable, Since: clk.Now()}, b)
	assert.Equal(t, []informer.BadKey[string]{b}, inf.BadKeys())
	st := inf.Stats()
	assert.Equal(t, uint64(1), st.DecodeErrors)
	assert.Equal(t, uint64(1), st.BadKeys)
	require.NoError(t, inf.WaitForSync(t.Context()), "a bad key does not hold up the sync")

	w.put(t, "b", 7, 6)
	_, ok = inf.BadKey("b")
	assert.False(t, ok, "b recovered at its next good value")
	assert.Empty(t, inf.BadKeys())
	assert.Equal(t, uint64(0), inf.Stats().BadKeys)
	assert.Equal(t, uint64(1), inf.Stats().DecodeErrors, "a counter")
	calls := h.waitCalls(t, 3)
	assert.Equal(t, []call{
		{Op: "add", Key: "a", New: 1, InitialList: true},
		{Op: "add", Key: "c", New: 3, InitialList: true},
		{Op: "add", Key: "b", New: 7},
	}, calls)
	assert.Empty(t, h.Violations())
}

func TestABadPutShouldKeepTheLastGoodValueAndLetEveryOtherKeyFlowOnTheSameWatch(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1, "b": 1})
	start(t, inf)
	w := src.nextWatch(t)

	w.putBad(t, "a", 2)
	w.put(t, "b", 2, 3) // after the bad value, on the same watch
	assert.Equal(t, map[string]int{"a": 1, "b": 2}, cacheMap(inf), "a keeps its last good value")
	assert.Equal(t, []string{"a@2+value"}, badKeys(inf))
	w.putBad(t, "a", 2) // re-sent after a reconnect: a duplicate
	assert.Equal(t, uint64(1), inf.Stats().DecodeErrors, "a duplicate is no new bad value")
	w.put(t, "a", 5, 4)
	assert.Equal(t, map[string]int{"a": 5, "b": 2}, cacheMap(inf))
	assert.Empty(t, inf.BadKeys())

	calls := h.waitCalls(t, 4)
	assert.Equal(t, []call{
		{Op: "update", Key: "b", Old: 1, New: 2},
		{Op: "update", Key: "a", Old: 1, New: 5},
	}, calls[2:], "no call for the bad value; the recovery is an update from the last good value")
	st := inf.Stats()
	assert.Zero(t, st.WatchErrors, "the watch did not stop at the bad value")
	assert.Zero(t, st.Violations)
	assert.Equal(t, informer.Revision(4), inf.LastRevision())
}

func TestABadPutBelowTheKeysBadRevisionShouldBeAViolation(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	src.list(1, nil)
	start(t, inf)
	w := src.nextWatch(t)
	w.putBad(t, "a", 5)
	w.put(t, "a", 4, 4) // older than the bad value: the source broke the order
	_, ok := inf.Get("a")
	assert.False(t, ok)
	assert.Equal(t, []string{"a@5"}, badKeys(inf))
	assert.Equal(t, uint64(1), inf.Stats().Violations)
}

func TestARelistShouldNeverDeleteAKeyBecauseItsValueIsBad(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1, "b": 1, "c": 1})
	start(t, inf)
	w := src.nextWatch(t)

	src.listEntries(9, bad("a", 7), good("b", 2), bad("d", 8))
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	assert.Equal(t, map[string]int{"a": 1, "b": 2}, cacheMap(inf), "a is listed, so kept; c vanished")
	assert.Equal(t, []string{"a@7+value", "d@8"}, badKeys(inf))
	w.put(t, "a", 3, 10)
	assert.Equal(t, []string{"d@8"}, badKeys(inf))

	// d, which never had a value, is no longer listed: it is not bad any
	// more, and no handler ever heard of it.
	src.listEntries(12, good("a", 3), good("b", 2))
	w.end <- informer.ErrRevisionExpired
	src.nextWatch(t)
	assert.Empty(t, inf.BadKeys())
	assert.Equal(t, uint64(0), inf.Stats().BadKeys)

	require.Eventually(t, func() bool { return assertMapEqual(map[string]int{"a": 3, "b": 2}, h.View()) }, wait, time.Millisecond)
	for _, c := range h.Calls() {
		if c.Op == "delete" {
			assert.Equal(t, "c", c.Key, "only c was deleted: %+v", c)
		}
		assert.NotEqual(t, "d", c.Key, "%+v", c)
	}
	assert.Empty(t, h.Violations())
}

func TestARelistOfAnEmptyCacheShouldForgetABadKeyItNoLongerLists(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	src.listEntries(1, bad("a", 1))
	start(t, inf)
	w := src.nextWatch(t)
	require.Equal(t, []string{"a@1"}, badKeys(inf))
	src.listEntries(5)
	w.end <- informer.ErrRevisionExpired
	src.nextWatch(t)
	assert.Empty(t, inf.BadKeys())
}

func TestATransformThatPanicsShouldMarkTheKeyBad(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New("t", src, logs.option(), informer.WithTransform(func(v int) int {
		if v == 13 {
			panic("unlucky")
		}
		return v
	})))
	src.list(1, map[string]int{"a": 1, "b": 13})
	start(t, inf)
	w := src.nextWatch(t)
	assert.Equal(t, []string{"b@1"}, badKeys(inf))
	w.put(t, "a", 13, 2)
	assert.Equal(t, map[string]int{"a": 1}, cacheMap(inf))
	assert.Equal(t, []string{"a@2+value", "b@1"}, badKeys(inf))
	b, _ := inf.BadKey("a")
	assert.ErrorContains(t, b.Err, "transform panicked: unlucky")
	st := inf.Stats()
	assert.Equal(t, uint64(2), st.DecodeErrors)
	assert.Equal(t, uint64(2), st.Panics)
	w.put(t, "a", 2, 3)
	w.put(t, "b", 3, 4)
	assert.Empty(t, inf.BadKeys())
	assert.Equal(t, map[string]int{"a": 2, "b": 3}, cacheMap(inf))
}

func TestDeletingABadKeyShouldClearItAndTellHandlersOnlyOfAKeyTheyHad(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	w := src.nextWatch(t)
	w.putBad(t, "a", 2)
	w.putBad(t, "b", 3)
	require.Equal(t, []string{"a@2+value", "b@3"}, badKeys(inf))
	w.del(t, "a", 4)
	w.del(t, "b", 5)
	assert.Empty(t, inf.BadKeys())
	assert.Empty(t, cacheMap(inf))
	w.put(t, "c", 1, 6)
	calls := h.waitCalls(t, 3)
	assert.Equal(t, []call{
		{Op: "add", Key: "a", New: 1, InitialList: true},
		{Op: "delete", Key: "a", New: 1},
		{Op: "add", Key: "c", New: 1},
	}, calls, "a's delete carries its last good value; b was never told")
	assert.Zero(t, inf.Stats().Violations)
}

func TestABadKeyShouldBeLoggedOncePerRevision(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, logs.option()))
	src.list(1, map[string]int{"a": 1})
	stop := start(t, inf)
	w := src.nextWatch(t)
	w.putBad(t, "a", 2)
	w.putBad(t, "a", 2) // re-sent
	src.listEntries(5, bad("a", 2))
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	src.listEntries(6, bad("a", 2))
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN msg=\"value cannot be decoded"), logs.String())
	w.putBad(t, "a", 7)
	stop() // within the interval it is counted, and logged when Run ends
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "level=WARN msg=\"value cannot be decoded"), out)
	assert.Contains(t, out, "count=1 sample_keys=[a] first_error=\"json: cannot unmarshal", out)
	assert.Equal(t, uint64(2), inf.Stats().DecodeErrors)
}

func TestEntriesShouldCarryTheKeysCachedRevision(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithIndex("parity", parity)))
	src.listEntries(9, informer.Entry[string, int]{Key: "a", Value: 1, Revision: 4}, good("b", 2))
	start(t, inf)
	w := src.nextWatch(t)
	revs := func(entries []informer.Entry[string, int]) map[string]informer.Revision {
		m := map[string]informer.Revision{}
		for _, e := range entries {
			m[e.Key] = e.Revision
		}
		return m
	}
	assert.Equal(t, map[string]informer.Revision{"a": 4, "b": 9}, revs(inf.List()),
		"a listed with its mod revision; b without one, so the list's")
	w.put(t, "b", 3, 10)
	assert.Equal(t, map[string]informer.Revision{"a": 4, "b": 10}, revs(inf.List()))
	assert.Equal(t, map[string]informer.Revision{"a": 4, "b": 10}, revs(inf.ByIndex("parity", "odd")))
	w.putBad(t, "a", 11)
	assert.Equal(t, map[string]informer.Revision{"a": 11, "b": 10}, revs(inf.List()),
		"a bad value moves the key's revision: a write conditional on it replaces the bad value")
}

func TestABadPutInABatchShouldNotHoldUpTheRestOfTheBatch(t *testing.T) {
	src := newBatchSource(1, map[string]int{"a": 1, "b": 1})
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	start(t, inf)
	require.NoError(t, inf.WaitForSync(t.Context()))
	require.NoError(t, src.send(t,
		put("a", 2, 2),
		informer.Event[string, int]{Type: informer.Put, Key: "a", Revision: 3, Err: errUndecodable},
		put("b", 2, 4),
		put("c", 1, 5),
	))
	require.NoError(t, inf.WaitForRevision(t.Context(), 5))
	assert.Equal(t, map[string]int{"a": 2, "b": 2, "c": 1}, cacheMap(inf))
	assert.Equal(t, []string{"a@3+value"}, badKeys(inf))
	assert.Equal(t, uint64(4), inf.Stats().Events)
	assert.Equal(t, informer.Revision(5), inf.LastRevision())
}

func TestAWriteConditionalOnAListedEntrysRevisionShouldSucceedOnMemstore(t *testing.T) {
	ctx := t.Context()
	st := must.Do(memstore.New[string, int]())
	_, err := st.Create(ctx, "a", 1)
	require.NoError(t, err)
	_, err = st.Create(ctx, "b", 1)
	require.NoError(t, err)
	_, err = st.Create(ctx, "c", 1) // the list's revision is above a's and b's
	require.NoError(t, err)
	inf := must.Do(informer.New[string, int]("t", st, quiet, informer.WithIndex("parity", parity)))
	start(t, inf)
	require.NoError(t, inf.WaitForSync(ctx))
	revOf := func(entries []informer.Entry[string, int], key string) informer.Revision {
		for _, e := range entries {
			if e.Key == key {
				return e.Revision
			}
		}
		require.FailNow(t, "not listed", key)
		return 0
	}

	rev, err := st.Update(ctx, "a", 3, revOf(inf.List(), "a"))
	require.NoError(t, err, "an entry from the initial list")
	require.NoError(t, inf.WaitForRevision(ctx, rev))
	_, err = st.Update(ctx, "a", 5, revOf(inf.ByIndex("parity", "odd"), "a"))
	require.NoError(t, err, "an entry changed by a watch event")
	_, err = st.Delete(ctx, "b", revOf(inf.ByIndex("parity", "odd"), "b"))
	assert.NoError(t, err, "a conditional delete of a listed child")
}

func TestABadEntryListedAgainWithoutARevisionShouldNotBeLoggedAgain(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, logs.option()))
	src.listEntries(1, good("a", 1), bad("b", 0))
	stop := start(t, inf)
	w := src.nextWatch(t)
	src.listEntries(5, good("a", 1), bad("b", 0)) // the same error: taken as the same value
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	assert.Equal(t, 1, strings.Count(logs.String(), "value cannot be decoded"), logs.String())
	assert.Equal(t, []string{"b@5"}, badKeys(inf), "its revision is the latest list's")
	src.listEntries(6, good("a", 1), informer.Entry[string, int]{Key: "b", Err: errors.New("another error")})
	w.end <- informer.ErrRevisionExpired
	src.nextWatch(t)
	stop() // within the interval it is counted, and logged when Run ends
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN msg=\"value cannot be decoded"), logs.String())
	assert.Contains(t, logs.String(), "count=1 sample_keys=[b] first_error=\"another error\"", logs.String())
	assert.Equal(t, uint64(2), inf.Stats().DecodeErrors)
}

// badBuckets lists one key of a memory store as undecodable.
type badBuckets struct {
	*memstore.Buckets[string, int]
	bad string
}

func (b badBuckets) ListBuckets(ctx context.Context, buckets []int) ([]informer.Entry[string, int], informer.Revision, error) {
	entries, rev, err := b.Buckets.ListBuckets(ctx, buckets)
	for i, e := range entries {
		if e.Key == b.bad {
			entries[i] = informer.Entry[string, int]{Key: e.Key, Revision: e.Revision, Err: errUndecodable}
		}
	}
	return entries, rev, err
}

func TestABucketLoadedWithABadKeyShouldMarkItAndItsReleaseShouldForgetIt(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("1/a", 1)
	store.Put("1/bad", 1)
	store.Put("2/a", 1)
	inf := must.Do(informer.New("ints", informer.Bucketed(badBuckets{memstore.WithBuckets(store, digitBucket), "1/bad"}, digitBucket), quiet))
	ctx := runInformer(t, inf)
	require.NoError(t, inf.AcquireBucket(ctx, 1))
	assert.Equal(t, []string{"1/a"}, keysOf(inf.List()))
	assert.Equal(t, []string{"1/bad@2"}, badKeys(inf))
	inf.ReleaseBucket(1)
	assert.Empty(t, inf.BadKeys(), "a released bucket's keys are no longer looked at")
	assert.Equal(t, uint64(0), inf.Stats().BadKeys)
}
