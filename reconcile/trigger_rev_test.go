package reconcile_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestATriggerRecordsTheRevisionOfItsChangeNotWhereTheInformerHadGotToWhenItDeliveredIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := reconciletest.New(t)
		store := must.Do(memstore.New[string, int]())
		hold := make(chan struct{})
		// The controller's delivery of a's write waits until the informer
		// has applied a later write, to b.
		waitOnA := func(c reconcile.Change[string, int]) bool {
			if c.Key == "a" && !c.InitialList {
				<-hold
			}
			return true
		}
		w := &whyLog{}
		inf := must.Do(informer.New("ints", informer.Source[string, int](store), quietInformer)) // not held by the harness
		h.Go("informer", inf.Run)
		c, err := reconcile.New("ints", w, reconcile.For(inf, waitOnA), reconcile.WithClock(h.Clock), on, quiet)
		require.NoError(t, err)
		h.Go("controller", c.Run)
		synctest.Wait()

		revA := store.Put("a", 1)
		synctest.Wait() // the delivery of a is held
		revB := store.Put("b", 1)
		require.NoError(t, inf.WaitForRevision(context.Background(), revB))
		require.Greater(t, inf.LastRevision(), revA)
		close(hold)
		synctest.Wait()

		runs := w.of("a")
		require.Len(t, runs, 1)
		require.Len(t, runs[0], 1)
		assert.Equal(t, reconcile.TriggerChange, runs[0][0].Kind)
		assert.Equal(t, revA, runs[0][0].Rev, "a's own write, not the informer's revision when it was delivered")
		require.Len(t, w.of("b"), 1)
		assert.Equal(t, revB, w.of("b")[0][0].Rev)
	})
}
