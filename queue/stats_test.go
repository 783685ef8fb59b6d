package queue_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/queuetest"
	"github.com/converge-go/converge/queue"
)

func TestStatsShouldCountReadyKeysByPriorityAndGroupAndTheWaitingAndProcessingOnes(t *testing.T) {
	q, _ := newTestQueue(t, queue.WithGroup(queuetest.Tenant), queue.WithAgeing(queue.NoAgeing))
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
	assert.False(t, s.OldestKnown, "no ready times without metrics or ageing")
	assert.False(t, s.ShuttingDown)
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
