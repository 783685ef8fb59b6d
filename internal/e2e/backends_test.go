package e2e

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// spec writes Size to name the way a user's API would: creating it at
// generation 1, or bumping the generation of a spec change.
func spec(t *testing.T, store informer.Store[string, Thing], name string, size int) {
	t.Helper()
	_, _, err := informer.CreateOrUpdate(t.Context(), store, name, func(th *Thing) error {
		if th.Size != size || th.Generation == 0 {
			th.Generation++
		}
		th.Size = size
		return nil
	})
	require.NoError(t, err, "spec %s", name)
}

func thingName(i int) string { return "thing-" + strconv.Itoa(i) }

func TestThingControllerShouldConvergeOnEveryBackend(t *testing.T) {
	eachBackend(t, func(t *testing.T, store informer.Store[string, Thing]) {
		ext := newExternal()
		r := newThingController(t, store, ext, true).start(t)
		want := map[string]int{}
		for i := range 5 {
			spec(t, store, thingName(i), i+1)
			want[thingName(i)] = i + 1
		}
		check := func() error { return converged(context.Background(), store, ext, want, false) }
		r.settle(t, "created", check)

		spec(t, store, thingName(0), 10)
		want[thingName(0)] = 10
		_, op, err := informer.RequestDelete(t.Context(), store, thingName(1))
		require.NoError(t, err)
		assert.Equal(t, informer.Updated, op, "the controller's finalizer holds the key")
		delete(want, thingName(1))
		r.settle(t, "resized and deleted", check)

		_, _, ok, err := store.Get(t.Context(), thingName(1))
		require.NoError(t, err)
		assert.False(t, ok, "the deleted key is gone once its finalizer was removed")
		th, _, _, err := store.Get(t.Context(), thingName(0))
		require.NoError(t, err)
		assert.Equal(t, []string{thingFinalizer}, th.Finalizers)
		assert.Equal(t, int64(2), th.Generation)
	})
}
