package informer_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestAHandlerAddedWhileTheStoreChangesShouldBeGivenEachKeysReplayBeforeItsChanges(t *testing.T) {
	const keys = 5000
	store := must.Do(memstore.New[string, int]())
	for i := range keys {
		store.Put("k"+strconv.Itoa(i), i)
	}
	inf := must.Do(informer.New[string, int]("t", store, quiet))
	start(t, inf)
	require.NoError(t, inf.WaitForSync(context.Background()))

	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Go(func() {
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := 0; !stop.Load() || i < 2000; i++ {
			key := "k" + strconv.Itoa(rnd.IntN(keys+keys/10)) // some new keys
			if rnd.IntN(5) == 0 {
				_, _ = store.Delete(context.Background(), key, 0)
			} else {
				store.Put(key, keys+i)
			}
		}
	})
	late := newRecorder()
	reg, err := inf.AddHandler(late) // while the writer runs
	require.NoError(t, err)
	stop.Store(true)
	wg.Wait()

	entries, rev, err := store.List(context.Background())
	require.NoError(t, err)
	want := map[string]int{}
	for _, e := range entries {
		want[e.Key] = e.Value
	}
	require.Eventually(t, func() bool { return inf.LastRevision() == rev && reg.Idle() }, wait, time.Millisecond)
	assert.Equal(t, want, cacheMap(inf))
	assert.Equal(t, want, late.View())
	// The recorder checks that no key was updated or deleted before it
	// was added, and that every update started from the value it had.
	assert.Empty(t, late.Violations())
	assert.True(t, reg.HasSynced())
}

// BenchmarkGetWhileAddHandlerReplays measures what adding a handler to an
// informer of 1M entries costs readers: each iteration adds a handler while
// another goroutine calls Get about every millisecond (so that it measures
// waiting for the informer's lock, not for a CPU), and reports the longest
// Get (max-get-ns), the 99th percentile (p99-get-ns), and how long
// AddHandler took (add-ns/op).
//
//	go test -run '^$' -bench GetWhileAddHandlerReplays -benchtime 5x ./informer/
func BenchmarkGetWhileAddHandlerReplays(b *testing.B) {
	const n = 1_000_000
	store := must.Do(memstore.New[int, int](memstore.WithHistory(1)))
	for i := range n {
		store.Put(i, i)
	}
	inf := must.Do(informer.New[int, int]("bench", store, quiet))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := inf.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}

	var gets []time.Duration
	var addTotal time.Duration
	b.ResetTimer()
	for range b.N {
		var stop atomic.Bool
		var wg sync.WaitGroup
		started := make(chan struct{})
		wg.Go(func() {
			close(started)
			for i := 0; !stop.Load(); i++ {
				time.Sleep(50 * time.Microsecond)
				t0 := time.Now()
				inf.Get(i % n)
				gets = append(gets, time.Since(t0))
			}
		})
		<-started
		t0 := time.Now()
		reg, err := inf.AddHandler(informer.HandlerFuncs[int, int]{})
		addTotal += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		reg.Remove()
	}
	b.StopTimer()
	slices.Sort(gets)
	b.ReportMetric(float64(gets[len(gets)-1].Nanoseconds()), "max-get-ns")
	b.ReportMetric(float64(gets[len(gets)*99/100].Nanoseconds()), "p99-get-ns")
	b.ReportMetric(float64(len(gets))/float64(b.N), "gets/op")
	b.ReportMetric(float64(addTotal.Nanoseconds())/float64(b.N), "add-ns/op")
}
