package e2e

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// deletedWhileDown runs the scenario: 20 Things reconciled; the controller
// and its informer stopped; 10 deletions requested, 2 specs changed, 2
// Things created; a new informer and controller started and settled on
// the 12 live Things. It returns what the external system holds then and
// the names it requested deletion of.
func deletedWhileDown(t *testing.T, store informer.Store[string, Thing], finalizer bool) (map[string]int, []string) {
	ext := newExternal()
	want := map[string]int{}
	for i := range 20 {
		spec(t, store, thingName(i), i+1)
		want[thingName(i)] = i + 1
	}
	first := newThingController(t, store, ext, finalizer).start(t)
	first.settle(t, "the first controller", func() error { return converged(context.Background(), store, ext, want, false) })
	first.stop(t)

	var deleted []string
	for i := range 10 {
		_, op, err := informer.RequestDelete(t.Context(), store, thingName(i))
		require.NoError(t, err)
		if finalizer {
			require.Equal(t, informer.Updated, op, "%s: the finalizer keeps the key, marked", thingName(i))
		} else {
			require.Equal(t, informer.Deleted, op, "%s: without a finalizer the key goes at once", thingName(i))
		}
		deleted = append(deleted, thingName(i))
		delete(want, thingName(i))
	}
	for _, i := range []int{10, 11} {
		spec(t, store, thingName(i), 100+i)
		want[thingName(i)] = 100 + i
	}
	for _, i := range []int{20, 21} {
		spec(t, store, thingName(i), i+1)
		want[thingName(i)] = i + 1
	}

	second := newThingController(t, store, ext, finalizer).start(t)
	second.settle(t, "the second controller", func() error {
		return converged(context.Background(), store, ext, want, !finalizer)
	})
	second.stop(t)
	return ext.snapshot(), deleted
}

// With its finalizer, the controller cleans up after deletions requested
// while it was down: the keys are listed at start, Deleting.
func TestDeletedWhileDownShouldBeCleanedUpWithTheFinalizer(t *testing.T) {
	eachBackend(t, func(t *testing.T, store informer.Store[string, Thing]) {
		resources, deleted := deletedWhileDown(t, store, true)

		var live []string
		for i := 10; i < 22; i++ {
			live = append(live, thingName(i))
		}
		assert.ElementsMatch(t, live, slices.Collect(maps.Keys(resources)), "the external system holds exactly the live Things' resources")
		for _, name := range deleted {
			_, _, ok, err := store.Get(t.Context(), name)
			require.NoError(t, err)
			assert.False(t, ok, "%s: still in the store", name)
		}
		entries, _, err := store.List(t.Context())
		require.NoError(t, err)
		assert.Len(t, entries, 12)
	})
}

// The control: without the finalizer the same scenario leaves the 10
// resources of the Things deleted while the controller was down behind,
// which shows that the test above can fail.
func TestDeletedWhileDownShouldLeaveOrphansWithoutTheFinalizer(t *testing.T) {
	eachBackend(t, func(t *testing.T, store informer.Store[string, Thing]) {
		resources, deleted := deletedWhileDown(t, store, false)

		var orphans []string
		for name := range resources {
			if slices.Contains(deleted, name) {
				orphans = append(orphans, name)
			}
		}
		assert.ElementsMatch(t, deleted, orphans, "every deleted Thing's resource is orphaned")
		assert.Len(t, resources, 22)
	})
}
