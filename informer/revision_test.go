package informer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// These tests run in synctest bubbles: after synctest.Wait, everything the
// informer could do has been done, so "has not returned" is a fact, not a
// guess made after a sleep.

// waitAsync calls WaitForRevision on a goroutine of its own; its result
// arrives on the channel.
func waitAsync(ctx context.Context, inf *informer.Informer[string, int], rev informer.Revision) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- inf.WaitForRevision(ctx, rev) }()
	return ch
}

// returned reports whether a waitAsync has returned, and with what. Call
// it after synctest.Wait.
func returned(ch <-chan error) (err error, ok bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// running starts inf in the bubble on a listed source at rev and returns
// the watch it opens.
func running(t *testing.T, src *script, inf *informer.Informer[string, int], rev informer.Revision, kv map[string]int) (*watchCall, func()) {
	t.Helper()
	src.list(rev, kv)
	stop := start(t, inf)
	return src.nextWatch(t), stop
}

func TestWaitForRevisionReturnsOnceTheRevisionIsAppliedAndNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		rec := newRecorder()
		_, err := inf.AddHandler(rec)
		require.NoError(t, err)
		done := waitAsync(t.Context(), inf, 3) // before Run: it waits for Run to get there

		w, stop := running(t, src, inf, 1, map[string]int{"a": 1})
		synctest.Wait()
		_, ok := returned(done)
		require.False(t, ok, "returned at the list's revision 1")
		w.put(t, "b", 2, 2)
		synctest.Wait()
		_, ok = returned(done)
		require.False(t, ok, "returned at revision 2")

		w.put(t, "c", 3, 3)
		synctest.Wait()
		err, ok = returned(done)
		require.True(t, ok, "did not return at revision 3")
		require.NoError(t, err)
		v, found := inf.Get("c")
		assert.True(t, found, "the write at the revision waited for is cached")
		assert.Equal(t, 3, v)
		assert.Equal(t, informer.Revision(3), inf.LastRevision())
		assert.Contains(t, rec.Calls(), call{Op: "add", Key: "c", New: 3})
		stop()
	})
}

func TestWaitForRevisionReturnsAtOnceWhenTheRevisionIsAlreadyReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		done, cancel := context.WithCancel(t.Context())
		cancel() // a done context proves that nothing waits

		require.NoError(t, inf.WaitForRevision(done, 0), "revision 0, before Run")
		w, stop := running(t, src, inf, 5, nil)
		synctest.Wait()
		require.NoError(t, inf.WaitForRevision(done, 5))
		require.NoError(t, inf.WaitForRevision(done, 4))
		w.put(t, "a", 1, 9)
		require.NoError(t, inf.WaitForRevision(done, 7), "a revision skipped by the store is reached too")
		stop()
		require.NoError(t, inf.WaitForRevision(done, 9), "reached, even after Run returned")
	})
}

func TestWaitForRevisionReturnsTheContextErrorWhenTheContextEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, nil)

		ctx, cancel := context.WithCancel(t.Context())
		cancelled := waitAsync(ctx, inf, 5)
		timeout, cancelTimeout := context.WithTimeout(t.Context(), time.Minute)
		defer cancelTimeout()
		timedOut := waitAsync(timeout, inf, 5)
		kept := waitAsync(t.Context(), inf, 5)
		synctest.Wait()
		cancel()
		synctest.Wait()
		err, ok := returned(cancelled)
		require.True(t, ok, "did not return on cancel")
		require.ErrorIs(t, err, context.Canceled)
		_, ok = returned(timedOut)
		require.False(t, ok)

		time.Sleep(time.Minute)
		synctest.Wait()
		err, ok = returned(timedOut)
		require.True(t, ok, "did not return at the deadline")
		require.ErrorIs(t, err, context.DeadlineExceeded)

		// The waiters that gave up are out of the way of the one left.
		w.put(t, "a", 1, 5)
		synctest.Wait()
		err, ok = returned(kept)
		require.True(t, ok)
		require.NoError(t, err)
		stop()
	})
}

func TestWaitForRevisionReturnsErrStoppedWhenRunReturnsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		_, stop := running(t, src, inf, 1, nil)
		done := waitAsync(t.Context(), inf, 2)
		synctest.Wait()
		stop()
		synctest.Wait()
		err, ok := returned(done)
		require.True(t, ok, "did not return when Run did")
		require.ErrorIs(t, err, informer.ErrStopped)
		require.ErrorIs(t, inf.WaitForRevision(t.Context(), 2), informer.ErrStopped, "after Run returned")
	})
}

func TestWaitForRevisionWakesManyWaitersInRevisionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, nil)
		// Registered out of order, several per revision.
		revs := []informer.Revision{9, 2, 5, 5, 3, 8, 2, 7, 4, 6, 9, 3}
		waits := make([]<-chan error, len(revs))
		for i, r := range revs {
			waits[i] = waitAsync(t.Context(), inf, r)
		}
		woken := make([]bool, len(revs))
		for rev := informer.Revision(2); rev <= 9; rev++ {
			w.put(t, "k", int(rev), rev)
			synctest.Wait()
			for i, r := range revs {
				if woken[i] {
					continue
				}
				err, ok := returned(waits[i])
				require.Equal(t, r <= rev, ok, "waiter for %d at revision %d", r, rev)
				if ok {
					require.NoError(t, err)
					woken[i] = true
				}
			}
		}
		stop()
	})
}

func TestWaitForRevisionIsWokenByABookmark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, map[string]int{"a": 1})
		done := waitAsync(t.Context(), inf, 7)
		w.send(t, informer.Event[string, int]{Type: informer.Bookmark, Revision: 6})
		synctest.Wait()
		_, ok := returned(done)
		require.False(t, ok, "woken by a bookmark below its revision")
		w.send(t, informer.Event[string, int]{Type: informer.Bookmark, Revision: 7})
		synctest.Wait()
		err, ok := returned(done)
		require.True(t, ok, "not woken by a bookmark at its revision")
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"a": 1}, cacheMap(inf), "nothing changed")
		stop()
	})
}

func TestWaitForRevisionIsWokenByADuplicateOnlyIfItsRevisionIsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, nil)
		w.put(t, "a", 1, 3)
		done := waitAsync(t.Context(), inf, 4)
		w.put(t, "a", 1, 3) // a duplicate: nothing new
		synctest.Wait()
		_, ok := returned(done)
		require.False(t, ok, "woken by a duplicate")
		w.put(t, "a", 2, 4)
		synctest.Wait()
		_, ok = returned(done)
		require.True(t, ok)
		stop()
	})
}

func TestWaitForRevisionAcrossARelistWakesOnlyWaitersAtOrBelowTheListedRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 10, map[string]int{"a": 1})
		above := waitAsync(t.Context(), inf, 12)
		far := waitAsync(t.Context(), inf, 15)

		// The revision expires; the relist is at 12.
		src.list(12, map[string]int{"a": 2})
		w.end <- informer.ErrRevisionExpired
		w = src.nextWatch(t)
		synctest.Wait()
		err, ok := returned(above)
		require.True(t, ok, "a relist at its revision did not wake it")
		require.NoError(t, err)
		_, ok = returned(far)
		require.False(t, ok)

		// The store is restored from an older snapshot: the relist goes
		// back to 5. Revisions 13 to 15 were never reached.
		src.list(5, map[string]int{"a": 3})
		w.end <- informer.ErrRevisionExpired
		w = src.nextWatch(t)
		synctest.Wait()
		require.Equal(t, informer.Revision(5), inf.LastRevision())
		_, ok = returned(far)
		require.False(t, ok, "woken by a relist below its revision")
		require.NoError(t, inf.WaitForRevision(t.Context(), 5))
		low := waitAsync(t.Context(), inf, 8)
		synctest.Wait()
		_, ok = returned(low)
		require.False(t, ok, "revision 8 was reached before the restore, not since")

		w.put(t, "a", 4, 15) // the new history reaches 15
		synctest.Wait()
		_, ok = returned(low)
		require.True(t, ok)
		_, ok = returned(far)
		require.True(t, ok)
		stop()
	})
}

func TestAfterRevisionCallsFOnceWhenTheRevisionIsReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, nil)
		var calls atomic.Int32
		var seen atomic.Int64
		cancel := inf.AfterRevision(3, func() {
			v, _ := inf.Get("a") // f may use the informer: it is not under its lock
			seen.Store(int64(v))
			calls.Add(1)
		})
		w.put(t, "b", 1, 2)
		synctest.Wait()
		require.Zero(t, calls.Load(), "called before the revision")
		w.put(t, "a", 7, 3)
		w.put(t, "a", 8, 4)
		w.send(t, informer.Event[string, int]{Type: informer.Bookmark, Revision: 5})
		synctest.Wait()
		require.Equal(t, int32(1), calls.Load())
		// f runs on its own goroutine, so the cache may have moved on.
		assert.Contains(t, []int64{7, 8}, seen.Load(), "f sees the cache at the revision or later")
		assert.False(t, cancel(), "stop after the call reports false")
		stop()
		require.Equal(t, int32(1), calls.Load())
	})
}

func TestAfterRevisionCallsFSoonWhenTheRevisionIsAlreadyReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		_, stop := running(t, src, inf, 4, nil)
		synctest.Wait()
		called := make(chan struct{})
		cancel := inf.AfterRevision(3, func() { close(called) })
		synctest.Wait()
		select {
		case <-called:
		default:
			require.FailNow(t, "f was not called")
		}
		assert.False(t, cancel())
		stop()
	})
}

func TestAfterRevisionStopBeforeTheRevisionPreventsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, nil)
		var calls atomic.Int32
		cancel := inf.AfterRevision(2, func() { calls.Add(1) })
		kept := inf.AfterRevision(2, func() { calls.Add(10) })
		require.True(t, cancel(), "stop before the call reports true")
		require.False(t, cancel(), "a second stop reports false")
		w.put(t, "a", 1, 2)
		synctest.Wait()
		require.Equal(t, int32(10), calls.Load(), "only the callback not stopped ran")
		assert.False(t, kept())
		stop()
	})
}

func TestAfterRevisionSlowFDoesNotStallTheCacheAndRunWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		src.list(1, nil)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- inf.Run(ctx) }()
		w := src.nextWatch(t)

		release := make(chan struct{})
		entered := make(chan struct{})
		inf.AfterRevision(2, func() {
			close(entered)
			<-release
		})
		w.put(t, "a", 1, 2)
		<-entered
		for rev := informer.Revision(3); rev <= 5; rev++ {
			w.put(t, "a", int(rev), rev)
		}
		require.NoError(t, inf.WaitForRevision(t.Context(), 5), "the cache moved on while f ran")
		v, _ := inf.Get("a")
		assert.Equal(t, 5, v)

		cancel()
		synctest.Wait()
		select {
		case <-ran:
			require.FailNow(t, "Run returned while f was running")
		default:
		}
		close(release)
		require.NoError(t, <-ran)
	})
}

func TestAfterRevisionNeverCallsFAfterRunReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		_, stop := running(t, src, inf, 3, nil)
		var calls atomic.Int32
		pending := inf.AfterRevision(4, func() { calls.Add(1) })
		synctest.Wait()
		stop()
		late := inf.AfterRevision(1, func() { calls.Add(1) }) // reached, but Run has returned
		synctest.Wait()
		require.Zero(t, calls.Load())
		assert.True(t, pending(), "never called: stop reports true")
		assert.True(t, late())
		assert.False(t, late(), "once")
	})
}

func TestAfterRevisionPanicsOnANilFunc(t *testing.T) {
	inf := must.Do(informer.New[string, int]("t", newScript(), quiet))
	assert.PanicsWithValue(t, `informer "t": AfterRevision: nil func`, func() { inf.AfterRevision(1, nil) })
}
