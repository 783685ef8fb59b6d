package events_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// keysUnder returns the store's keys that start with prefix.
func keysUnder(t *testing.T, st *memstore.Store[string, events.Event], prefix string) []string {
	t.Helper()
	entries, _, err := st.List(context.Background())
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Key, prefix) {
			out = append(out, e.Key)
		}
	}
	return out
}

// at returns ev(key, msg, count) last seen at t.
func at(key, msg string, count int, t time.Time) events.Event {
	e := ev(key, msg, count)
	e.First, e.Last = t, t
	return e
}

// A key whose messages differ every time (they name a pod) makes a new
// event each time; under the default rate limit the store would get one
// record every 10 s, forever.
func TestTheStoreSinkShouldKeepAtMostMaxEventsPerKeyRecordsOfAKey(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st, events.WithStoreClock(clk)))
	rec := must.Do(events.NewRecorder("c", events.WithSink(sink), events.WithClock(clk)))
	const n = 1000
	for i := range n {
		rec.Eventf(ctx, "web", events.Warning, "BackOff", "Back-off restarting failed pod web-%d", i)
		rec.Eventf(ctx, "db", events.Normal, "Started", "started")
		clk.Step(events.DefaultRefill)
		if i%100 == 99 {
			require.NoError(t, sink.Flush(ctx))
		}
	}
	require.NoError(t, sink.Flush(ctx))
	web := keysUnder(t, st, "events/web/")
	assert.Len(t, web, events.MaxEventsPerKey)
	assert.Len(t, keysUnder(t, st, "events/db/"), 1, "another key's event is not counted against web")
	newest := events.EventID("c", "web", events.Warning, "BackOff", "Back-off restarting failed pod web-999")
	assert.Contains(t, web, "events/web/"+newest, "the newest events are kept, the oldest deleted")
	assert.NotContains(t, web, "events/web/"+events.EventID("c", "web", events.Warning, "BackOff", "Back-off restarting failed pod web-0"))
	assert.Equal(t, uint64(n-events.MaxEventsPerKey), sink.Stats().Deleted)
	assert.Equal(t, events.MaxEventsPerKey+1, sink.Stats().Records)
}

// Control: the same event repeated stays one record, counted.
func TestTheStoreSinkShouldKeepARepeatedEventAsOneCountedRecord(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st, events.WithStoreClock(clk)))
	rec := must.Do(events.NewRecorder("c", events.WithSink(sink), events.WithClock(clk)))
	for range 1000 {
		rec.Event(ctx, "web", events.Warning, "BackOff", "Back-off restarting failed container")
		clk.Step(events.DefaultRefill)
	}
	require.NoError(t, sink.Flush(ctx))
	entries, _, err := st.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, 1000, entries[0].Value.Count)
}

func TestPruneShouldDeleteEventsNotSeenForTheTTLAndKeepTheOthers(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st, events.WithStoreClock(clk), events.WithTTL(time.Hour)))
	sink.Write(ctx, at("web", "old", 1, t0))
	sink.Write(ctx, at("web", "again", 1, t0))
	require.NoError(t, sink.Flush(ctx))

	clk.Step(50 * time.Minute)
	sink.Write(ctx, at("web", "again", 2, clk.Now()))
	sink.Write(ctx, at("db", "new", 1, clk.Now()))
	require.NoError(t, sink.Flush(ctx))
	require.NoError(t, sink.Prune(ctx))
	assert.Len(t, keysUnder(t, st, "events/"), 3, "nothing is an hour old yet")

	clk.Step(10 * time.Minute)
	require.NoError(t, sink.Prune(ctx))
	assert.ElementsMatch(t, []string{sink.StoreKey(ev("web", "again", 1)), sink.StoreKey(ev("db", "new", 1))}, keysUnder(t, st, "events/"))
	assert.Equal(t, uint64(1), sink.Stats().Deleted)

	clk.Step(time.Hour)
	require.NoError(t, sink.Prune(ctx))
	assert.Empty(t, keysUnder(t, st, "events/"))
	assert.Zero(t, sink.Stats().Records)
}

// A sink learns what an earlier process (or another replica) left in the
// store by listing it, so that those records expire too.
func TestPruneShouldExpireRecordsAnotherSinkWroteUnderItsPrefixOnly(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0.Add(2 * time.Hour))
	st := must.Do(memstore.New[string, events.Event]())
	old := at("web", "from before the restart", 1, t0)
	st.Put("events/web/"+old.ID, old)
	st.Put("pods/web/"+old.ID, old) // another sink's prefix
	fresh := at("web", "fresh", 1, clk.Now())
	st.Put("events/web/"+fresh.ID, fresh)

	sink := must.Do(events.NewStoreSink(st, events.WithStoreClock(clk)))
	require.NoError(t, sink.Prune(ctx))
	assert.Equal(t, []string{"events/web/" + fresh.ID}, keysUnder(t, st, "events/"))
	assert.Len(t, keysUnder(t, st, "pods/"), 1, "another prefix is another sink's")
}

// A record the sink thinks expired but someone else wrote again since is
// kept: the sink reads it before it deletes it.
func TestPruneShouldKeepARecordAnotherWriterRefreshed(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st, events.WithStoreClock(clk)))
	e := at("web", "m", 1, t0)
	sink.Write(ctx, e)
	require.NoError(t, sink.Flush(ctx))
	require.NoError(t, sink.Prune(ctx)) // lists now: its next list is an hour away

	clk.Step(90 * time.Minute)
	st.Put(sink.StoreKey(e), at("web", "m", 2, clk.Now())) // another replica counted it again
	require.NoError(t, sink.Prune(ctx))
	v, _, ok, err := st.Get(ctx, sink.StoreKey(e))
	require.NoError(t, err)
	require.True(t, ok, "a refreshed record was deleted")
	assert.Equal(t, 2, v.Count)
}

func TestDeleteKeyShouldDeleteTheKeysEventsAndDropItsPendingOnes(t *testing.T) {
	ctx := context.Background()
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	sink.Write(ctx, ev("web", "a", 1))
	sink.Write(ctx, ev("web", "b", 1))
	sink.Write(ctx, ev("db", "a", 1))
	require.NoError(t, sink.Flush(ctx))
	sink.Write(ctx, ev("web", "c", 1))

	sink.DeleteKey("web")
	assert.Equal(t, 0, sink.Stats().Pending, "web's pending event was dropped")
	require.NoError(t, sink.Flush(ctx))
	assert.Empty(t, keysUnder(t, st, "events/web/"))
	assert.Len(t, keysUnder(t, st, "events/db/"), 1)
	assert.Equal(t, uint64(2), sink.Stats().Deleted)
}

func TestTheDeletionHandlerShouldDeleteTheEventsOfADeletedKey(t *testing.T) {
	ctx := context.Background()
	st := must.Do(memstore.New[string, events.Event]())
	sink := must.Do(events.NewStoreSink(st))
	sink.Write(ctx, ev("7", "a", 1))
	require.NoError(t, sink.Flush(ctx))

	h := events.DeletionHandler[int, string](sink)
	h.OnUpdate(7, "x", "y", false)
	require.NoError(t, sink.Flush(ctx))
	assert.Len(t, keysUnder(t, st, "events/7/"), 1, "an update is not a deletion")
	h.OnDelete(7, "y")
	require.NoError(t, sink.Flush(ctx))
	assert.Empty(t, keysUnder(t, st, "events/7/"))
}

func TestRunShouldPruneExpiredEventsOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := must.Do(memstore.New[string, events.Event]())
		sink := must.Do(events.NewStoreSink(st, events.WithTTL(time.Hour)))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- sink.Run(ctx) }()

		sink.Write(ctx, at("web", "m", 1, time.Now()))
		synctest.Wait()
		require.Equal(t, 1, st.Len())

		time.Sleep(time.Hour + 6*time.Minute) // the TTL, and a tenth of it, the prune period
		synctest.Wait()
		assert.Zero(t, st.Len(), "Run did not prune")

		cancel()
		assert.NoError(t, <-done)
	})
}

func TestBadRetentionOptionsShouldBeAnErrorAndWriteNothing(t *testing.T) {
	st := must.Do(memstore.New[string, events.Event]())
	for want, o := range map[string]events.StoreOption{
		"events.NewStoreSink: WithTTL(0s): want >= 1s": events.WithTTL(0),
		"WithTTL(1ms): want >= 1s":                     events.WithTTL(time.Millisecond),
		"WithMaxPerKey(0): want >= 1":                  events.WithMaxPerKey(0),
		"WithStoreClock(nil)":                          events.WithStoreClock(nil),
		"WithRetryInterval(0s): want > 0":              events.WithRetryInterval(0),
	} {
		s, err := events.NewStoreSink(st, o)
		assert.ErrorContains(t, err, want)
		assert.Nil(t, s)
	}
	assert.Zero(t, st.Len(), "a refused sink wrote to the store")
}
