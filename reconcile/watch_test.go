package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestCancelOnChangeIgnoresResyncsSoALongReconcileFinishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		store := must.Do(memstore.New[string, int]())
		store.Put("a", 1)
		var mu sync.Mutex
		var causes []error
		release := make(chan struct{})
		rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
			var err error
			select {
			case <-release:
			case <-ctx.Done():
				err = context.Cause(ctx)
			}
			mu.Lock()
			causes = append(causes, err)
			mu.Unlock()
			return reconcile.Result{}, err
		})
		inf := must.Do(informer.New("ints", store, informer.WithClock(clk), informer.WithResync(50*time.Millisecond)))
		c, err := reconcile.New("ints", rec, reconcile.For(inf), reconcile.WithCancelOnChange(), reconcile.WithClock(clk), quiet)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = inf.Run(ctx) })
		wg.Go(func() { _ = c.Run(ctx) })
		synctest.Wait() // the first reconcile is waiting for release
		for range 30 {
			clk.Step(50 * time.Millisecond)
			synctest.Wait() // the resync reached the controller
		}
		require.Equal(t, uint64(30), inf.Stats().Resyncs)
		close(release)
		synctest.Wait()
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, causes)
		for i, err := range causes {
			assert.NoError(t, err, "reconcile %d was cancelled", i)
		}
	})
}

func TestAPanicInAMapperOrPredicateIsRecoveredCountedAndTheOtherKeysGoOn(t *testing.T) {
	h := reconciletest.New(t)
	owners := must.Do(memstore.New[string, int]())
	children := must.Do(memstore.New[string, string]()) // child -> owner
	owners.Put("o1", 0)
	rec := newRecorder(owners)
	reg := newRegistry()
	ownerInf := reconciletest.Informer(h, "owners", owners)
	childInf := reconciletest.Informer(h, "children", children)
	toOwner := func(_ string, owner string) []string {
		if owner == "mapper-bomb" {
			panic("mapper exploded")
		}
		return []string{owner}
	}
	noPredicateBomb := func(c reconcile.Change[string, string]) bool {
		if c.Key == "predicate-bomb" {
			panic("predicate exploded")
		}
		return true
	}
	reconciletest.Controller(h, "owners", rec, reconcile.For(ownerInf),
		reconcile.Watch(childInf, toOwner, noPredicateBomb), reconcile.WithMetrics(reg), quiet)
	h.Settle()

	children.Put("c0", "mapper-bomb")
	children.Put("predicate-bomb", "o1")
	children.Put("c1", "o1")
	h.Settle()
	assert.Equal(t, 2.0, reg.value(t, "converge_watch_panics_total", nil))
	assert.Equal(t, 2, rec.count("o1"), "the initial list and c1's change, not the panicking ones")
}

func TestAKeyTheQueueCannotUseIsRecoveredNotACrash(t *testing.T) {
	h := reconciletest.New(t)
	ch := make(chan any, 2)
	reg := newRegistry()
	var mu sync.Mutex
	var got []any
	rec := reconcile.Func(func(_ context.Context, key any) (reconcile.Result, error) {
		mu.Lock()
		got = append(got, key)
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	c := reconciletest.Controller(h, "anys", rec, reconcile.FromChannel("keys", ch), reconcile.WithMetrics(reg), quiet)
	ch <- []int{1} // an interface key holding a slice cannot be hashed
	ch <- "fine"
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, []any{"fine"}, got)
	assert.Equal(t, 1.0, reg.value(t, "converge_watch_panics_total", nil))
	_ = c
}

type termKey struct{}

func TestFromFuncRunsWithTheValuesOfRunsContext(t *testing.T) {
	h := reconciletest.New(t)
	seen := make(chan any, 1)
	src := reconcile.FromFunc("values", func(ctx context.Context, _ func(string)) error {
		seen <- ctx.Value(termKey{})
		<-ctx.Done()
		return nil
	})
	ok := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	c, err := reconcile.New("c", ok, src, reconcile.WithClock(h.Clock), quiet)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithValue(h.Context(), termKey{}, 7))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	assert.Equal(t, 7, <-seen)
	cancel()
	require.NoError(t, <-done)
}

func TestAnOwnerChangeReconcilesEveryOldAndNewKeyOnce(t *testing.T) {
	h := reconciletest.New(t)
	owners := must.Do(memstore.New[string, int]())
	groups := must.Do(memstore.New[string, int]()) // a group of n maps to keys 0..n-1
	rec := newRecorder(owners)
	ownerInf := reconciletest.Informer(h, "owners", owners)
	groupInf := reconciletest.Informer(h, "groups", groups)
	toKeys := func(_ string, n int) []string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprint(i)
		}
		return keys
	}
	reconciletest.Controller(h, "owners", rec, reconcile.For(ownerInf), reconcile.Watch(groupInf, toKeys))
	groups.Put("g", 300)
	h.Settle()
	rec.mu.Lock()
	rec.seen = map[string][]int{}
	rec.mu.Unlock()

	groups.Put("g", 200) // keys 200..299 leave the group, 0..199 stay
	h.Settle()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Len(t, rec.seen, 300, "every key of the old and the new value")
	for k, vs := range rec.seen {
		assert.Len(t, vs, 1, "key %s", k)
	}
}

func TestByIndexRejectsAnIndexTheInformerDoesNotHaveWhenItIsCalled(t *testing.T) {
	byParity := informer.WithIndex("parity", func(_ string, v int) []string { return []string{fmt.Sprint(v % 2)} })
	primary := must.Do(informer.New("ints", must.Do(memstore.New[string, int]()), byParity))
	value := func(_ string, v int) string { return fmt.Sprint(v % 2) }
	assert.PanicsWithValue(t, `reconcile.ByIndex: informer "ints" has no index named "parity-typo" (give it with informer.WithIndex)`,
		func() { reconcile.ByIndex[string, int](primary, "parity-typo", value) })
	assert.NotPanics(t, func() { reconcile.ByIndex[string, int](primary, "parity", value) })
}
