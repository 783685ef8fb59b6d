package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// mirror is a level-triggered reconciler: it makes the observed store hold
// exactly the desired store's entries. It finds what to clean up from the
// observed state, not from events: a restarted controller has no event for
// a key deleted while it was down, but it does list what it created.
func mirror(desired, observed *memstore.Store[string, int]) reconcile.Reconciler[string] {
	return reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		want, _, ok, _ := desired.Get(context.Background(), key)
		have, _, exists, _ := observed.Get(context.Background(), key)
		switch {
		case !ok && exists:
			_, _ = observed.Delete(context.Background(), key, 0)
		case ok && (!exists || have != want):
			observed.Put(key, want)
		}
		return reconcile.Result{}, nil
	})
}

// runMirror runs the mirror controller, with informers of its own, until the
// subtest named name ends.
func runMirror(t *testing.T, name string, desired, observed *memstore.Store[string, int], during func(h *reconciletest.Harness)) {
	t.Run(name, func(t *testing.T) {
		h := reconciletest.New(t)
		dInf := reconciletest.Informer(h, "desired", desired)
		oInf := reconciletest.Informer(h, "observed", observed)
		reconciletest.Controller(h, "mirror", mirror(desired, observed), reconcile.For(dInf),
			reconcile.Watch(oInf, func(key string, _ int) []string { return []string{key} }),
			reconcile.WithWorkers(2))
		h.Settle()
		during(h)
	})
}

func TestAStoppedControllerConvergesToTheStoreWhenStartedAgain(t *testing.T) {
	desired, observed := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, int]())
	for i := range 20 {
		desired.Put(fmt.Sprint("k", i), 0)
	}
	runMirror(t, "first run", desired, observed, func(*reconciletest.Harness) {
		assert.Equal(t, storeMap(desired), storeMap(observed))
	})

	// While it is down: change some keys, delete some, add one.
	for i := range 5 {
		desired.Put(fmt.Sprint("k", i), 1)
	}
	for i := 5; i < 10; i++ {
		_, _ = desired.Delete(context.Background(), fmt.Sprint("k", i), 0)
	}
	desired.Put("new", 7)
	require.NotEqual(t, storeMap(desired), storeMap(observed))

	runMirror(t, "restarted", desired, observed, func(h *reconciletest.Harness) {
		assert.Equal(t, storeMap(desired), storeMap(observed), "changed keys updated, deleted ones removed, new one added")
		desired.Put("k0", 2)
		_, _ = desired.Delete(context.Background(), "k1", 0)
		h.Settle()
		assert.Equal(t, storeMap(desired), storeMap(observed), "and it keeps following")
	})
}

func storeMap(s *memstore.Store[string, int]) map[string]int {
	entries, _, _ := s.List(context.Background())
	out := map[string]int{}
	for _, e := range entries {
		out[e.Key] = e.Value
	}
	return out
}
