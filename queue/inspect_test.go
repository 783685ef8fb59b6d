package queue_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/queue"
)

func tenant(k string) string { return strings.SplitN(k, "/", 2)[0] }

func TestStatsShouldCountReadyKeysByPriorityAndGroupAndTheWaitingAndProcessingOnes(t *testing.T) {
	q, _ := newTestQueue(t, queue.WithGroup(tenant), queue.WithAgeing(queue.NoAgeing))
	q.Add("a/1")
	q.Add("a/2")
	q.Add("b/1")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "a/3", "c/1")
	q.AddAfter("b/2", time.Minute)
	q.AddAfter("b/3", time.Duration(math.MaxInt64)) // parked
	require.Equal(t, "a/1", get(t, q))

	s := q.Stats()
	assert.Equal(t, map[int]int{queue.PriorityNormal: 2, queue.PriorityLow: 2}, s.Ready)
	assert.Equal(t, map[string]int{"a": 2, "b": 1, "c": 1}, s.ReadyByGroup)
	assert.Equal(t, 4, s.Len)
	assert.Equal(t, 2, s.Waiting)
	assert.Equal(t, 1, s.Processing)
	assert.False(t, s.OldestKnown, "no ready times without metrics, WithReadyTimes or ageing")
	assert.False(t, s.ShuttingDown)
}

func TestStatsShouldReportTheOldestReadyKeysWaitWithReadyTimes(t *testing.T) {
	for _, ageing := range []time.Duration{queue.NoAgeing, queue.DefaultAgeing} {
		t.Run(fmt.Sprintf("ageing=%v", ageing != queue.NoAgeing), func(t *testing.T) {
			q, clk := newTestQueue(t, queue.WithReadyTimes(), queue.WithAgeing(ageing))
			q.Add("old")
			clk.Step(3 * time.Second)
			q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "new")
			clk.Step(2 * time.Second)

			s := q.Stats()
			require.True(t, s.OldestKnown)
			assert.Equal(t, 5*time.Second, s.OldestReady, "the low-priority key, not the head of the highest list")
			info, ok := q.Inspect("old")
			require.True(t, ok)
			assert.Equal(t, clk.Now().Add(-5*time.Second), info.ReadySince)
		})
	}
}

func TestStatsShouldKnowTheOldestWaitWithAgeingOnceSeveralPrioritiesAreReady(t *testing.T) {
	q, clk := newTestQueue(t) // default ageing, no metrics, no ready times
	q.Add("a")
	assert.False(t, q.Stats().OldestKnown, "alone with its priority, a key is not stamped")
	clk.Step(time.Second)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "b") // starts the ageing clock
	clk.Step(4 * time.Second)
	s := q.Stats()
	require.True(t, s.OldestKnown)
	assert.Equal(t, 4*time.Second, s.OldestReady, "a ages from the moment b joined it")
}

func TestInspectShouldTellEachPhaseWithItsPriorityAndDueTime(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "ready")
	q.AddAfter("waiting", time.Minute)
	q.AddAfter("parked", time.Duration(math.MaxInt64))
	q.Add("dirty")
	q.Add("processing")
	require.Equal(t, "ready", get(t, q))
	q.Done("ready")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "ready")
	require.Equal(t, "ready", get(t, q))
	require.Equal(t, "dirty", get(t, q))
	require.Equal(t, "processing", get(t, q))
	q.Add("dirty")
	q.AddAfter("processing", time.Hour)
	q.Done("ready")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "ready")

	for key, want := range map[string]queue.KeyInfo{
		"ready":      {Phase: queue.Ready, Priority: queue.PriorityHigh},
		"waiting":    {Phase: queue.Waiting, Due: clk.Now().Add(time.Minute)},
		"parked":     {Phase: queue.Waiting, Parked: true},
		"dirty":      {Phase: queue.Dirty},
		"processing": {Phase: queue.Processing, Due: clk.Now().Add(time.Hour)},
	} {
		got, ok := q.Inspect(key)
		require.True(t, ok, key)
		assert.Equal(t, want, got, key)
		assert.Equal(t, want.Phase.String(), strings.ToLower(want.Phase.String()))
	}
	_, ok := q.Inspect("never-added")
	assert.False(t, ok)
	assert.Equal(t, "waiting", queue.Waiting.String())
}

func TestPeekShouldListReadyKeysInTheOrderGetHandsThemOut(t *testing.T) {
	q, _ := newTestQueue(t, queue.WithGroup(tenant), queue.WithAgeing(queue.NoAgeing))
	for i := range 5 {
		q.Add(fmt.Sprintf("a/%d", i))
	}
	q.Add("b/0")
	q.Add("b/1")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "c/0", "a/9")
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityHigh}, "d/0")
	q.AddAfter("e/0", time.Minute)

	peeked := q.Peek(100)
	assert.Equal(t, peeked[:3], q.Peek(3), "a shorter peek is a prefix")
	assert.Equal(t, drain(t, q), peeked)
	assert.Len(t, peeked, 10, "the waiting key is not ready")
	assert.Nil(t, q.Peek(0))
}

func TestPeekShouldReturnAtMostMaxPeekKeys(t *testing.T) {
	q, _ := newTestQueue(t)
	for i := range queue.MaxPeek + 5 {
		q.Add(fmt.Sprint(i))
	}
	assert.Len(t, q.Peek(1<<30), queue.MaxPeek)
}
