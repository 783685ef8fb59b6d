package informer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestStatsLastEventShouldBeTheTimeOfTheLastEventThatMovedTheRevision(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithClock(clk)))
	src.list(10, map[string]int{"a": 1})
	defer start(t, inf)()
	w := src.nextWatch(t)
	assert.True(t, inf.Stats().LastEvent.IsZero(), "a list is not an event")

	clk.Step(time.Second)
	w.put(t, "a", 2, 11)
	at := clk.Now()
	assert.Equal(t, at, inf.Stats().LastEvent)

	clk.Step(time.Second)
	w.put(t, "a", 2, 11) // re-sent: moves nothing
	assert.Equal(t, at, inf.Stats().LastEvent)
	w.del(t, "a", 12)
	assert.Equal(t, clk.Now(), inf.Stats().LastEvent)
}

// headSource is a script that can tell the store's head revision.
type headSource struct {
	*script
	head informer.Revision
	err  error
}

func (h *headSource) Revision(context.Context) (informer.Revision, error) { return h.head, h.err }

func TestHeadShouldAskASourceThatCanTellAndSayUnknownForOneThatCannot(t *testing.T) {
	plain := must.Do(informer.New[string, int]("plain", newScript(), quiet))
	_, ok, err := plain.Head(context.Background())
	assert.False(t, ok)
	assert.NoError(t, err)

	src := &headSource{script: newScript(), head: 42}
	inf := must.Do(informer.New[string, int]("head", src, quiet))
	rev, ok, err := inf.Head(context.Background())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, informer.Revision(42), rev)

	src.err = errors.New("down")
	_, ok, err = inf.Head(context.Background())
	assert.True(t, ok)
	assert.EqualError(t, err, "down")
}
