package events_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/internal/must"
)

func ev(key, msg string, count int) events.Event {
	return events.Event{ID: events.EventID("s", key, events.Normal, "R", msg), Key: key, Source: "s",
		Type: events.Normal, Reason: "R", Message: msg, Count: count, First: t0, Last: t0}
}

func TestTheMemorySinkKeepsTheNewerVersionWhenVersionsArriveOutOfOrder(t *testing.T) {
	mem := must.Do(events.NewMemorySink(0))
	ctx := context.Background()
	mem.Write(ctx, ev("web", "m", 5))
	mem.Write(ctx, ev("web", "m", 3)) // an older version, late
	got := mem.Events("web")
	require.Len(t, got, 1)
	assert.Equal(t, 5, got[0].Count)
}

func TestTheMemorySinkKeepsTheNewestEventsOfAKeyNewestFirst(t *testing.T) {
	mem := must.Do(events.NewMemorySink(0))
	ctx := context.Background()
	for i := range events.MaxEventsPerKey + 5 {
		mem.Write(ctx, ev("web", strconv.Itoa(i), 1))
	}
	mem.Write(ctx, ev("web", "10", 2)) // counted again: first now
	got := mem.Events("web")
	require.Len(t, got, events.MaxEventsPerKey)
	assert.Equal(t, "10", got[0].Message)
	assert.Equal(t, strconv.Itoa(events.MaxEventsPerKey+4), got[1].Message)
	assert.Equal(t, "5", got[len(got)-1].Message, "0-4 were dropped; moving 10 up drops nothing")
}

func TestTheMemorySinkDropsTheLeastRecentlyWrittenKey(t *testing.T) {
	mem := must.Do(events.NewMemorySink(2))
	ctx := context.Background()
	mem.Write(ctx, ev("a", "m", 1))
	mem.Write(ctx, ev("b", "m", 1))
	mem.Write(ctx, ev("a", "m", 2))
	mem.Write(ctx, ev("c", "m", 1)) // drops b
	assert.Equal(t, []string{"c", "a"}, mem.Keys())
	assert.Nil(t, mem.Events("b"))
}

func TestEventsOfAnUnknownKeyAreNil(t *testing.T) {
	assert.Nil(t, must.Do(events.NewMemorySink(0)).Events("nope"))
}
