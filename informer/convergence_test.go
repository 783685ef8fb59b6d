package informer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// The informer's central contract: whatever the source does within its
// contract, once it is healthy and writes stop, the cache equals the store
// and every handler's view (its calls applied to a map) equals the store.
// A failing seed reproduces with -run 'TestConverges/seed=N'.
func TestConvergesToTheStoreUnderFaults(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			convergeUnderFaults(t, seed)
		})
	}
}

func convergeUnderFaults(t *testing.T, seed uint64) {
	const (
		writers = 4
		writes  = 400 // per writer
		keys    = 40
	)
	// A short history makes the store expire watches that fall behind,
	// on top of the simulated compactions.
	store := must.Do(memstore.New[string, int](memstore.WithHistory(256)))
	src := must.Do(faults.New(store, seed))
	inf := must.Do(informer.New("converge", src, quiet,
		informer.WithIndex("parity", parity),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, Jitter: backoff.FullJitter})))
	fast, slow := newRecorder(), newRecorder()
	slow.slow = 100 * time.Microsecond
	_, err := inf.AddHandler(fast)
	require.NoError(t, err)
	stop := start(t, inf)

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range writes {
				key := "k" + strconv.Itoa(rnd.IntN(keys))
				if rnd.IntN(4) == 0 {
					_, _ = store.Delete(context.Background(), key, 0)
				} else {
					store.Put(key, w*1_000_000+i) // unique, so a stale value shows
				}
				if i%4 == 0 {
					time.Sleep(time.Millisecond) // spread the writes over ~0.1s of faults
				}
			}
		}()
	}
	time.Sleep(2 * time.Millisecond)
	_, err = inf.AddHandler(slow) // late: replay plus changes
	require.NoError(t, err)
	wg.Wait()
	src.Heal()

	entries, _, err := store.List(context.Background())
	require.NoError(t, err)
	want := map[string]int{}
	for _, e := range entries {
		want[e.Key] = e.Value
	}
	converged := func() bool {
		return assertMapEqual(want, cacheMap(inf)) && assertMapEqual(want, fast.View()) && assertMapEqual(want, slow.View())
	}
	if !assert.Eventually(t, converged, wait, time.Millisecond) {
		assert.Equal(t, want, cacheMap(inf), "cache")
		assert.Equal(t, want, fast.View(), "fast handler")
		assert.Equal(t, want, slow.View(), "slow handler")
	}
	var even []string
	for k, v := range want {
		if v%2 == 0 {
			even = append(even, k)
		}
	}
	assert.ElementsMatch(t, even, keysOf(inf.ByIndex("parity", "even")))
	assert.Empty(t, fast.Violations())
	assert.Empty(t, slow.Violations())
	assert.True(t, inf.HasSynced())
	c := src.Counts()
	assert.Positive(t, c.ListErrors+c.WatchErrors+c.Expired+c.Duplicates, "no fault was injected: %+v", c)
	stop()
	t.Logf("faults %+v; informer %+v", c, inf.Stats())
}
