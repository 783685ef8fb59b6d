package informer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

func TestWaitForCacheReturnsBeforeAHandlerHasBeenGivenTheList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := must.Do(memstore.New[string, int]())
	_, err := store.Create(ctx, "a", 1)
	require.NoError(t, err)
	inf := must.Do(informer.New("ints", store))
	release := make(chan struct{})
	_, err = inf.AddHandler(informer.HandlerFuncs[string, int]{AddFunc: func(string, int, bool) { <-release }})
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer close(release)
	wg.Go(func() { _ = inf.Run(ctx) })

	waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.NoError(t, inf.WaitForCache(waitCtx))
	v, ok := inf.Get("a")
	assert.True(t, ok)
	assert.Equal(t, 1, v)
	assert.False(t, inf.HasSynced(), "the handler has not returned from its add")
}
