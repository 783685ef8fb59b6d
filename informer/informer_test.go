package informer_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

var quiet = informer.WithLogger(slog.New(slog.DiscardHandler))

// parity files even values under "even" and odd ones under "odd".
func parity(_ string, v int) []string {
	if v%2 == 0 {
		return []string{"even"}
	}
	return []string{"odd"}
}

func keysOf(entries []informer.Entry[string, int]) []string {
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}

func TestCacheAndIndexFollowListAndWatch(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	src.list(10, map[string]int{"a": 1, "b": 2, "c": 3})
	start(t, inf)
	w := src.nextWatch(t)
	assert.Equal(t, informer.Revision(10), w.after)
	assert.Equal(t, 3, inf.Len())
	assert.Equal(t, []string{"a", "c"}, keysOf(inf.ByIndex("parity", "odd")))

	w.put(t, "a", 4, 11) // moves from odd to even
	w.put(t, "d", 5, 12)
	w.del(t, "c", 13)

	v, ok := inf.Get("a")
	assert.True(t, ok)
	assert.Equal(t, 4, v)
	_, ok = inf.Get("c")
	assert.False(t, ok)
	assert.Equal(t, map[string]int{"a": 4, "b": 2, "d": 5}, cacheMap(inf))
	assert.Equal(t, []string{"a", "b"}, keysOf(inf.ByIndex("parity", "even")))
	assert.Equal(t, []string{"d"}, keysOf(inf.ByIndex("parity", "odd")))
	assert.Empty(t, inf.ByIndex("parity", "none"))
	assert.Equal(t, informer.Revision(13), inf.LastRevision())
}

func TestByIndexPanicsOnAnUnknownIndex(t *testing.T) {
	inf := must.Do(informer.New[string, int]("t", newScript(), quiet))
	assert.PanicsWithValue(t, `informer: no index named "nope"`, func() { inf.ByIndex("nope", "x") })
}

func TestNewShouldReturnAnErrorForOptionsThatCannotWork(t *testing.T) {
	inf, err := informer.New[string, int]("t", newScript(), informer.WithTransform(func(s string) string { return s }))
	assert.ErrorContains(t, err, `informer.New("t"): WithTransform: got func(string) string, want func(int) int: the option was built for other key or value types`)
	assert.Nil(t, inf)
	_, err = informer.New[string, int]("t", newScript(), informer.WithIndex("p", parity), informer.WithIndex("p", parity))
	assert.ErrorContains(t, err, `informer.New("t"): WithIndex("p"): duplicate index name`)
	_, err = informer.New[string, int]("t", newScript(), informer.WithIndex[string, int]("p", nil))
	assert.ErrorContains(t, err, `informer.New("t"): WithIndex("p"): nil IndexFunc`)
	_, err = informer.New[string, int]("t", newScript(), informer.WithIndex[string, string]("p", nil))
	assert.ErrorContains(t, err, `informer.New("t"): WithIndex("p"): got informer.IndexFunc[string,string]`)
	_, err = informer.New[string, int]("t", newScript(), nil)
	assert.ErrorContains(t, err, `informer.New("t"): option 0 is nil`)
}

func TestTransformAppliesToListedAndWatchedValues(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithTransform(func(v int) int { return v * 10 })))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	src.nextWatch(t).put(t, "b", 2, 2)
	assert.Equal(t, map[string]int{"a": 10, "b": 20}, cacheMap(inf))
	h.waitCalls(t, 2)
	assert.Equal(t, map[string]int{"a": 10, "b": 20}, h.View())
}

func TestDuplicateEventsChangeNothing(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, nil)
	start(t, inf)
	w := src.nextWatch(t)
	w.put(t, "a", 1, 2)
	w.put(t, "a", 1, 2) // duplicate
	w.del(t, "a", 3)
	w.del(t, "a", 3) // duplicate
	w.put(t, "b", 1, 4)
	// b's add is delivered after everything pushed for a before it.
	require.Eventually(t, func() bool { return assertMapEqual(map[string]int{"b": 1}, h.View()) }, wait, time.Millisecond)
	// a's add and delete may have been coalesced into nothing; what
	// matters is that no update or second delete of a was delivered.
	var ops []string
	for _, c := range h.Calls() {
		if c.Key == "a" {
			ops = append(ops, c.Op)
		}
	}
	assert.Contains(t, [][]string{nil, {"add", "delete"}}, ops)
	assert.Empty(t, h.Violations())
	assert.Equal(t, map[string]int{"b": 1}, h.View())
	assert.Equal(t, uint64(3), inf.Stats().Events)
}

func TestHandlerAddedLateGetsTheCacheReplayedAsInitialAdds(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	src.list(5, map[string]int{"a": 1, "b": 2})
	start(t, inf)
	w := src.nextWatch(t)
	require.NoError(t, inf.WaitForSync(context.Background()))

	h := newRecorder()
	reg, err := inf.AddHandler(h)
	require.NoError(t, err)
	calls := h.waitCalls(t, 2)
	slices.SortFunc(calls, func(x, y call) int { return compareStrings(x.Key, y.Key) })
	assert.Equal(t, []call{
		{Op: "add", Key: "a", New: 1, InitialList: true},
		{Op: "add", Key: "b", New: 2, InitialList: true},
	}, calls)
	require.Eventually(t, reg.HasSynced, wait, time.Millisecond)

	w.put(t, "a", 3, 6)
	calls = h.waitCalls(t, 3)
	assert.Equal(t, call{Op: "update", Key: "a", Old: 1, New: 3}, calls[2])
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestHasSyncedWaitsUntilEveryEarlyHandlerHasTheFirstList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		fast, slow := newRecorder(), newRecorder()
		slow.gate = make(chan struct{})
		_, err := inf.AddHandler(fast)
		require.NoError(t, err)
		slowReg, err := inf.AddHandler(slow)
		require.NoError(t, err)
		assert.False(t, inf.HasSynced())

		src.list(1, map[string]int{"a": 1, "b": 2})
		stop := start(t, inf)
		src.nextWatch(t)
		synctest.Wait()
		assert.Len(t, fast.Calls(), 2)
		assert.Equal(t, 2, inf.Len(), "the cache is filled")
		assert.False(t, inf.HasSynced(), "but the slow handler has not been given the list")
		assert.False(t, slowReg.HasSynced())

		synced := make(chan error, 1)
		go func() { synced <- inf.WaitForSync(context.Background()) }()
		slow.gate <- struct{}{}
		synctest.Wait() // everything that can happen now has happened
		select {
		case <-synced:
			require.FailNow(t, "WaitForSync returned with one add undelivered")
		default:
		}
		assert.False(t, inf.HasSynced())
		slow.gate <- struct{}{}
		synctest.Wait()
		select {
		case err := <-synced:
			require.NoError(t, err)
		default:
			require.FailNow(t, "WaitForSync did not return")
		}
		assert.True(t, inf.HasSynced())
		assert.True(t, slowReg.HasSynced())
		for _, c := range slow.Calls() {
			assert.True(t, c.InitialList, "%+v", c)
		}
		close(slow.gate)
		stop()
	})
}

func TestWaitForSyncFailsWhenContextEndsOrRunStops(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, inf.WaitForSync(ctx), context.DeadlineExceeded)

	stop := start(t, inf) // no list reply: it never syncs
	stop()
	require.ErrorIs(t, inf.WaitForSync(context.Background()), informer.ErrStopped)
	assert.False(t, inf.HasSynced())
}

func TestRelistAfterExpiryEmitsTheDifferenceWithLastKnownValues(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"keep": 1, "change": 2, "gone": 3})
	start(t, inf)
	w := src.nextWatch(t)
	h.waitCalls(t, 3)      // delivered, so the put below is not coalesced into an add
	w.put(t, "gone", 5, 2) // the last value the informer sees of "gone"
	h.waitCalls(t, 4)

	src.list(9, map[string]int{"keep": 1, "change": 4, "new": 6})
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	assert.Equal(t, informer.Revision(9), w.after)

	calls := h.waitCalls(t, 8)[4:]
	slices.SortFunc(calls, func(x, y call) int { return compareStrings(x.Key, y.Key) })
	assert.Equal(t, []call{
		{Op: "update", Key: "change", Old: 2, New: 4, Resync: true},
		{Op: "delete", Key: "gone", New: 5},
		{Op: "update", Key: "keep", Old: 1, New: 1, Resync: true},
		{Op: "add", Key: "new", New: 6},
	}, calls)
	assert.Equal(t, map[string]int{"keep": 1, "change": 4, "new": 6}, cacheMap(inf))
	assert.Equal(t, []string{"change", "new"}, keysOf(inf.ByIndex("parity", "even")))
	assert.Equal(t, uint64(1), inf.Stats().Expired)
}

func TestWatchErrorsResumeAfterTheLastRevisionWithExponentialBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet,
			informer.WithWatchBackoff(backoff.Exponential{Base: time.Second, Cap: time.Minute})))
		src.list(1, nil)
		start(t, inf)
		w := src.nextWatch(t)
		w.put(t, "a", 1, 2)
		w.put(t, "b", 1, 3)
		w.end <- assert.AnError

		// The watch made progress, so the first retry waits Base.
		w = nextWatchAfter(t, src, time.Second)
		// Revision 3 might have been one of several changes at 3: resume
		// after 2 and skip the duplicates.
		assert.Equal(t, informer.Revision(2), w.after)
		w.put(t, "b", 1, 3) // re-sent: not progress
		w.end <- assert.AnError

		// No progress: the next waits twice as long.
		w = nextWatchAfter(t, src, 2*time.Second)
		assert.Equal(t, informer.Revision(2), w.after)
		assert.Equal(t, uint64(2), inf.Stats().WatchErrors)
		assert.Equal(t, uint64(2), inf.Stats().Events)
	})
}

// nextWatchAfter checks, in a synctest bubble, that src is watched again
// exactly d from now, not earlier, and returns that watch.
func nextWatchAfter(t *testing.T, src *script, d time.Duration) *watchCall {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	synctest.Wait()
	select {
	case <-src.watches:
		require.FailNow(t, "watched again before the backoff")
	default:
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	select {
	case w := <-src.watches:
		return w
	default:
		require.FailNow(t, "not watched again after the backoff")
		return nil
	}
}

func TestListErrorsAreRetriedWithBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithClock(clk),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Second, Cap: time.Minute})))
	src.lists <- listReply{err: assert.AnError}
	start(t, inf)
	require.Eventually(t, clk.HasWaiters, wait, time.Millisecond)
	assert.False(t, inf.HasSynced())
	src.list(1, map[string]int{"a": 1})
	clk.Step(time.Second)
	src.nextWatch(t)
	require.NoError(t, inf.WaitForSync(context.Background()))
	assert.Equal(t, informer.Stats{Lists: 1, ListErrors: 1}, inf.Stats())
}

func TestResyncRedeliversEveryKeyAsAnUpdate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithClock(clk), informer.WithResync(time.Minute)))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1, "b": 2})
	start(t, inf)
	src.nextWatch(t)
	h.waitCalls(t, 2)
	require.Eventually(t, clk.HasWaiters, wait, time.Millisecond) // the ticker

	clk.Step(time.Minute)
	calls := h.waitCalls(t, 4)[2:]
	slices.SortFunc(calls, func(x, y call) int { return compareStrings(x.Key, y.Key) })
	assert.Equal(t, []call{
		{Op: "update", Key: "a", Old: 1, New: 1, Resync: true},
		{Op: "update", Key: "b", Old: 2, New: 2, Resync: true},
	}, calls)
	assert.Equal(t, uint64(1), inf.Stats().Resyncs)
}

func TestSlowHandlerDoesNotBlockAnotherHandlerOrTheCache(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	blocked, fast := newRecorder(), newRecorder()
	blocked.gate = make(chan struct{})
	_, err := inf.AddHandler(blocked)
	require.NoError(t, err)
	_, err = inf.AddHandler(fast)
	require.NoError(t, err)
	src.list(1, nil)
	stop := start(t, inf)
	w := src.nextWatch(t)

	const n = 1000
	want := map[string]int{}
	for i := range n {
		key := "k" + strconv.Itoa(i%100)
		w.put(t, key, i, informer.Revision(i+2))
		want[key] = i
	}
	assert.Equal(t, want, cacheMap(inf), "the cache kept up")
	require.Eventually(t, func() bool { return assertMapEqual(want, fast.View()) }, wait, time.Millisecond,
		"the fast handler kept up")
	assert.Empty(t, blocked.Calls())

	close(blocked.gate)
	require.Eventually(t, func() bool { return assertMapEqual(want, blocked.View()) }, wait, time.Millisecond)
	// At most one call in progress plus one coalesced change per key.
	assert.LessOrEqual(t, len(blocked.Calls()), 101)
	stop()
}

func assertMapEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestRunStopsEverythingWhenTheContextEnds(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithResync(time.Hour)))
	for range 3 {
		_, err := inf.AddHandler(newRecorder())
		require.NoError(t, err)
	}
	src.list(1, map[string]int{"a": 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	src.nextWatch(t)
	_, err := inf.AddHandler(newRecorder()) // started while running
	require.NoError(t, err)

	require.Error(t, inf.Run(ctx), "a second Run fails")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(wait):
		require.FailNow(t, "Run did not return")
	}
	// goleak (TestMain) checks that no dispatcher outlived Run.
	_, err = inf.AddHandler(newRecorder())
	require.ErrorIs(t, err, informer.ErrStopped)
}
