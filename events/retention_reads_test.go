package events_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// readCounter is a Store that counts its Gets.
type readCounter struct {
	informer.Store[string, events.Event]
	gets atomic.Int64
}

func (r *readCounter) Get(ctx context.Context, key string) (events.Event, informer.Revision, bool, error) {
	r.gets.Add(1)
	return r.Store.Get(ctx, key)
}

func TestDeleteKeyShouldDeleteTheKeysRecordsWithoutReadingThem(t *testing.T) {
	ctx := context.Background()
	st := &readCounter{Store: must.Do(memstore.New[string, events.Event]())}
	sink := must.Do(events.NewStoreSink(st))
	for _, msg := range []string{"a", "b", "c"} {
		sink.Write(ctx, ev("web", msg, 1))
	}
	require.NoError(t, sink.Flush(ctx))
	require.Len(t, keysUnder(t, st.Store.(*memstore.Store[string, events.Event]), "events/web/"), 3)

	st.gets.Store(0)
	sink.DeleteKey("web")
	require.NoError(t, sink.Flush(ctx))
	assert.Empty(t, keysUnder(t, st.Store.(*memstore.Store[string, events.Event]), "events/web/"))
	assert.Equal(t, uint64(3), sink.Stats().Deleted)
	assert.Zero(t, st.gets.Load(), "nothing of a deleted key's records is compared: no read")
}

func TestCappingAKeyShouldDeleteItsOldestRecordsWithoutReadingThem(t *testing.T) {
	ctx := context.Background()
	mem := must.Do(memstore.New[string, events.Event]())
	st := &readCounter{Store: mem}
	writer := must.Do(events.NewStoreSink(st))
	for i, msg := range []string{"a", "b", "c", "d"} {
		writer.Write(ctx, at("web", msg, 1, t0.Add(time.Duration(i)*time.Second)))
	}
	require.NoError(t, writer.Flush(ctx))

	// A sink with a lower cap learns the records from a List and deletes
	// the oldest beyond it.
	st.gets.Store(0)
	capped := must.Do(events.NewStoreSink(st, events.WithMaxPerKey(1), events.WithStoreClock(clocktesting.NewFakeClock(t0.Add(time.Minute)))))
	require.NoError(t, capped.Prune(ctx))
	assert.Len(t, keysUnder(t, mem, "events/web/"), 1)
	assert.Equal(t, uint64(3), capped.Stats().Deleted)
	assert.Zero(t, st.gets.Load(), "the cap compares the index's times, not the stored ones: no read")
}
