package informer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/internal/must"
)

// named is what the polled backend lists.
type named struct {
	Name string
	N    int
}

func TestATransientPollErrorShouldResumeTheWatchWithoutARelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Second
		var (
			mu       sync.Mutex
			objects  = []named{{"a", 1}, {"b", 1}, {"c", 1}}
			failNext atomic.Bool
			calls    []string
		)
		list := func(context.Context) ([]named, error) {
			if failNext.CompareAndSwap(true, false) {
				return nil, errors.New("503 Service Unavailable")
			}
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(objects), nil
		}
		record := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf(format, args...))
		}
		src := must.Do(poll.New(list, func(o named) string { return o.Name },
			poll.WithInterval(interval), poll.WithJitter(0)))
		inf := must.Do(informer.New("polled", src, quiet,
			informer.WithWatchBackoff(backoff.Exponential{Base: time.Second, Cap: time.Second})))
		_, err := inf.AddHandler(informer.HandlerFuncs[string, named]{
			AddFunc:    func(k string, v named, _ bool) { record("add %s %d", k, v.N) },
			UpdateFunc: func(k string, o, v named, resync bool) { record("update %s %d->%d resync=%v", k, o.N, v.N, resync) },
			DeleteFunc: func(k string, _ named) { record("delete %s", k) },
		})
		require.NoError(t, err)
		stop := start(t, inf)
		synctest.Wait() // listed, and the watch waits for its first poll
		require.True(t, inf.HasSynced())

		mu.Lock()
		objects[0].N = 2 // a changes
		mu.Unlock()
		time.Sleep(interval)
		synctest.Wait() // the poll emitted a's change

		failNext.Store(true)
		time.Sleep(interval)
		synctest.Wait() // the poll failed: the informer backs off
		assert.Equal(t, uint64(1), inf.Stats().WatchErrors)
		time.Sleep(time.Second)
		synctest.Wait() // it resumed the watch
		time.Sleep(interval)
		synctest.Wait() // which polled again: nothing changed

		mu.Lock()
		got := slices.Clone(calls)
		mu.Unlock()
		slices.Sort(got[:3])
		assert.Equal(t, []string{"add a 1", "add b 1", "add c 1", "update a 1->2 resync=false"}, got,
			"no relist: no update for the unchanged keys")
		stats := inf.Stats()
		assert.False(t, stats.LastEvent.IsZero(), "the polled change was an event")
		stats.LastEvent = time.Time{}
		assert.Equal(t, informer.Stats{Lists: 1, WatchErrors: 1, Events: 1}, stats)
		assert.Equal(t, map[string]named{"a": {"a", 2}, "b": {"b", 1}, "c": {"c", 1}}, cacheOf(inf))
		stop()
	})
}
