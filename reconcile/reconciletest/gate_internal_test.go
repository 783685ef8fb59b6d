package reconciletest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// A store whose history is shorter than the writes the gate has not taken
// yet cannot be followed change by change: the gate takes its contents
// instead, a put per key and a delete per key gone, at its revision.
func TestTheGateTakesTheStoresContentsWhenItsHistoryIsGone(t *testing.T) {
	store := must.Do(memstore.New[string, int](memstore.WithHistory(1)))
	store.Put("a", 1)
	store.Put("b", 1)
	g, err := newGatedSource("x", store, func() {})
	require.NoError(t, err)
	store.Put("a", 2)
	_, _ = store.Delete(context.Background(), "b", 0)
	store.Put("c", 1) // three changes after the gate's snapshot; the store keeps one

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pump(ctx) }()
	require.Eventually(t, func() bool { return g.caughtUp(store.Revision()) }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	rev := store.Revision()
	var got []informer.Event[string, int]
	for _, c := range g.held {
		got = append(got, c.ev)
	}
	assert.Equal(t, []informer.Event[string, int]{
		{Type: informer.Put, Key: "a", Value: 2, Revision: rev},
		{Type: informer.Put, Key: "c", Value: 1, Revision: rev},
		{Type: informer.Delete, Key: "b", Revision: rev},
	}, got)
	entries, listRev, err := g.List(context.Background())
	require.NoError(t, err)
	assert.Equal(t, informer.Revision(2), listRev, "the informer still sees the store as of the snapshot")
	assert.Len(t, entries, 2)
}
