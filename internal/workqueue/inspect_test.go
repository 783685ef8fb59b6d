package workqueue_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/queuetest"
	"github.com/converge-go/converge/internal/workqueue"
)

func TestStatsShouldReportTheOldestReadyKeysWaitWithReadyTimes(t *testing.T) {
	for _, ageing := range []time.Duration{workqueue.NoAgeing, workqueue.DefaultAgeing} {
		t.Run(fmt.Sprintf("ageing=%v", ageing != workqueue.NoAgeing), func(t *testing.T) {
			q, clk := newTestQueue(t, workqueue.WithReadyTimes(), workqueue.WithAgeing(ageing))
			q.Add("old")
			clk.Step(3 * time.Second)
			q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityHigh}, "new")
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

func TestInspectShouldTellEachPhaseWithItsPriorityAndDueTime(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityHigh}, "ready")
	q.AddAfter("waiting", time.Minute)
	q.AddAfter("parked", time.Duration(math.MaxInt64))
	q.Add("dirty")
	q.Add("processing")
	require.Equal(t, "ready", get(t, q))
	q.Done("ready")
	q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityHigh}, "ready")
	require.Equal(t, "ready", get(t, q))
	require.Equal(t, "dirty", get(t, q))
	require.Equal(t, "processing", get(t, q))
	q.Add("dirty")
	q.AddAfter("processing", time.Hour)
	q.Done("ready")
	q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityHigh}, "ready")

	for key, want := range map[string]workqueue.KeyInfo{
		"ready":      {Phase: workqueue.Ready, Priority: workqueue.PriorityHigh},
		"waiting":    {Phase: workqueue.Waiting, Due: clk.Now().Add(time.Minute)},
		"parked":     {Phase: workqueue.Waiting, Parked: true},
		"dirty":      {Phase: workqueue.Dirty},
		"processing": {Phase: workqueue.Processing, Due: clk.Now().Add(time.Hour)},
	} {
		got, ok := q.Inspect(key)
		require.True(t, ok, key)
		assert.Equal(t, want, got, key)
		assert.Equal(t, want.Phase.String(), strings.ToLower(want.Phase.String()))
	}
	_, ok := q.Inspect("never-added")
	assert.False(t, ok)
	assert.Equal(t, "waiting", workqueue.Waiting.String())
}

func TestPeekShouldListReadyKeysInTheOrderGetHandsThemOut(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithGroup(queuetest.Tenant), workqueue.WithAgeing(workqueue.NoAgeing))
	for i := range 5 {
		q.Add(fmt.Sprintf("a/%d", i))
	}
	q.Add("b/0")
	q.Add("b/1")
	q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityLow}, "c/0", "a/9")
	q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityHigh}, "d/0")
	q.AddAfter("e/0", time.Minute)

	peeked := q.Peek(100)
	assert.Equal(t, peeked[:3], q.Peek(3), "a shorter peek is a prefix")
	assert.Equal(t, drain(t, q), peeked)
	assert.Len(t, peeked, 10, "the waiting key is not ready")
	assert.Nil(t, q.Peek(0))
}

func TestPeekShouldReturnAtMostMaxPeekKeys(t *testing.T) {
	q, _ := newTestQueue(t)
	for i := range workqueue.MaxPeek + 5 {
		q.Add(fmt.Sprint(i))
	}
	assert.Len(t, q.Peek(1<<30), workqueue.MaxPeek)
}
