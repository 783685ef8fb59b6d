package events_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// stored reads e's record from the store the sink writes to.
func stored(t *testing.T, st informer.ReadWriter[string, events.Event], sink *events.StoreSink, e events.Event) (events.Event, bool) {
	t.Helper()
	v, _, ok, err := st.Get(context.Background(), sink.StoreKey(e))
	require.NoError(t, err)
	return v, ok
}

func TestTheStoreSinkWritesEventsThroughTheStore(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	rec, _, _ := newRecorder(events.WithSink(sink))
	ctx := context.Background()
	rec.Event(ctx, "web", events.Normal, "SuccessfulCreate", "Created pod: web-1")
	rec.Event(ctx, "web", events.Warning, "FailedCreate", "exceeded quota")
	require.NoError(t, sink.Flush(ctx))

	e := events.Event{ID: events.EventID("test-controller", "web", events.Warning, "FailedCreate", "exceeded quota"), Key: "web"}
	assert.Equal(t, "events/web/"+e.ID, sink.StoreKey(e))
	got, ok := stored(t, st, sink, e)
	require.True(t, ok)
	assert.Equal(t, "exceeded quota", got.Message)
	assert.Equal(t, 1, got.Count)
	assert.Equal(t, 2, st.Len())
	assert.Equal(t, events.StoreStats{Written: 2, Records: 2}, sink.Stats())
}

func TestTheStoreSinkCoalescesTheVersionsOfOneEventIntoOneWrite(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	rec, _, _ := newRecorder(events.WithSink(sink))
	ctx := context.Background()
	for range 100 {
		rec.Event(ctx, "web", events.Warning, "BackOff", "restarting")
	}
	require.NoError(t, sink.Flush(ctx))
	assert.Equal(t, informer.Revision(1), st.Revision(), "one write for 100 versions")
	require.NoError(t, sink.Flush(ctx))
	assert.Equal(t, informer.Revision(1), st.Revision(), "nothing pending, nothing written")

	rec.Event(ctx, "web", events.Warning, "BackOff", "restarting")
	require.NoError(t, sink.Flush(ctx))
	e := events.Event{ID: events.EventID("test-controller", "web", events.Warning, "BackOff", "restarting"), Key: "web"}
	got, _ := stored(t, st, sink, e)
	assert.Equal(t, 101, got.Count)
	assert.Equal(t, t0, got.First)
}

func TestTheStoreSinkNeverMovesAStoredCountBack(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	ctx := context.Background()
	ahead := ev("web", "m", 10) // another writer got further
	ahead.First = t0.Add(-time.Hour)
	st.Put(sink.StoreKey(ahead), ahead)

	late := ev("web", "m", 3)
	sink.Write(ctx, late)
	require.NoError(t, sink.Flush(ctx))
	got, _ := stored(t, st, sink, late)
	assert.Equal(t, 10, got.Count)
	assert.Equal(t, t0.Add(-time.Hour), got.First)

	newer := ev("web", "m", 11)
	sink.Write(ctx, newer)
	require.NoError(t, sink.Flush(ctx))
	got, _ = stored(t, st, sink, newer)
	assert.Equal(t, 11, got.Count)
	assert.Equal(t, t0.Add(-time.Hour), got.First, "the earlier First is kept")
}

func TestTheStoreSinkBoundsItsPendingEvents(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st, events.WithMaxPending(2)))
	ctx := context.Background()
	sink.Write(ctx, ev("web", "a", 1))
	sink.Write(ctx, ev("web", "b", 1))
	sink.Write(ctx, ev("web", "c", 1)) // dropped
	sink.Write(ctx, ev("web", "a", 2)) // a newer version of a pending one: kept
	assert.Equal(t, events.StoreStats{Dropped: 1, Pending: 2}, sink.Stats())
	require.NoError(t, sink.Flush(ctx))
	got, _ := stored(t, st, sink, ev("web", "a", 0))
	assert.Equal(t, 2, got.Count)
}

func TestAFlushWithADoneContextKeepsTheEventsPending(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sink.Write(ctx, ev("web", "a", 1))
	err := sink.Flush(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, sink.Stats().Pending)
	assert.Equal(t, 0, st.Len())
	require.NoError(t, sink.Flush(context.Background()))
	assert.Equal(t, 1, st.Len())
}

// flaky fails the first n writes.
type flaky struct {
	informer.Store[string, events.Event]
	n atomic.Int32
}

var errDown = errors.New("store down")

func (f *flaky) Create(ctx context.Context, k string, v events.Event) (informer.Revision, error) {
	if f.n.Add(-1) >= 0 {
		return 0, errDown
	}
	return f.Store.Create(ctx, k, v)
}

func TestRunWritesQueuedEventsRetriesAfterAFailureAndStopsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flaky{Store: must.Do(memstore.New[string, events.Event]())}
		st.n.Store(1)
		sink := must.Do(events.NewStoreSink(st, events.WithRetryInterval(5*time.Second)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sink.Run(ctx) }()

		sink.Write(ctx, ev("web", "a", 1))
		synctest.Wait() // Run flushed, failed, and waits to retry
		assert.Equal(t, events.StoreStats{Failed: 1, Pending: 1}, sink.Stats())

		time.Sleep(5 * time.Second) // the bubble's fake clock: the retry interval
		synctest.Wait()
		assert.Equal(t, events.StoreStats{Written: 1, Failed: 1, Records: 1}, sink.Stats())

		sink.Write(ctx, ev("web", "b", 1))
		synctest.Wait()
		assert.Equal(t, uint64(2), sink.Stats().Written, "written without waiting for any interval")

		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			assert.NoError(t, err)
		default:
			t.Fatal("Run did not return when its context was done")
		}
	})
}

func TestBadStoreSinkOptionsShouldBeAnError(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	_, err := events.NewStoreSink(nil)
	assert.ErrorContains(t, err, "events.NewStoreSink: nil store")
	_, err = events.NewStoreSink(st, events.WithMaxPending(0))
	assert.ErrorContains(t, err, "events.NewStoreSink: WithMaxPending(0): want >= 1")
	_, err = events.NewStoreSink(st, nil)
	assert.ErrorContains(t, err, "events.NewStoreSink: option 0 is nil")
}
