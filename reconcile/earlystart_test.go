package reconcile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

func TestWorkersReconcileListedKeysWhileTheHandlerIsStillQueueingThem(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"a", "b"} {
		_, err := store.Create(ctx, k, 1)
		require.NoError(t, err)
	}
	inf := must.Do(informer.New("ints", store))
	firstReconcile := make(chan struct{})
	var once sync.Once
	var reconciled atomic.Int32
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		once.Do(func() { close(firstReconcile) })
		reconciled.Add(1)
		return reconcile.Result{}, nil
	})
	var seen atomic.Int32
	overlapped := make(chan bool, 1)
	// The handler queues the first listed key, then, before it queues the
	// second, waits for a worker to reconcile the first.
	wait := func(reconcile.Change[string, int]) bool {
		if seen.Add(1) == 2 {
			select {
			case <-firstReconcile:
				overlapped <- true
			case <-time.After(5 * time.Second):
				overlapped <- false
			}
		}
		return true
	}
	c, err := reconcile.New("c", rec, reconcile.For(inf, wait))
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = inf.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })

	assert.True(t, <-overlapped, "no worker ran while the handler was still queueing the list")
	require.Eventually(t, func() bool { return reconciled.Load() == 2 }, 10*time.Second, time.Millisecond)
}
