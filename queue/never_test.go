package queue_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/queue"
)

// A delay too long to represent is "never": the key waits, no timer is set
// for it, and only a plain Add (or a shorter delay) makes it ready.

func TestAddAfterWithAnInfiniteDelayShouldParkTheKey(t *testing.T) {
	for _, delay := range []time.Duration{rate.InfDuration, math.MaxInt64, math.MaxInt64 - 1} {
		q, clk := newTestQueue(t)
		clk.Step(time.Hour) // the queue's clock is well past its start: now+delay overflows
		q.AddAfter("parked", delay)
		assert.Equal(t, 0, q.Len(), "delay %d", delay)
		assert.True(t, q.Idle(), "a parked key is waiting, not ready")
		assert.False(t, clk.HasWaiters(), "no timer may be set for a key that waits forever")
		clk.Step(100 * 365 * 24 * time.Hour)
		assert.Equal(t, 0, q.Len(), "still parked a century later")
	}
}

func TestAParkedKeyShouldBecomeReadyOnAPlainAddOrAShorterDelay(t *testing.T) {
	q, clk := newTestQueue(t)
	clk.Step(time.Hour)
	q.AddAfter("a", math.MaxInt64)
	q.AddAfter("b", math.MaxInt64)
	q.Add("a")
	assert.Equal(t, []string{"a"}, drain(t, q))
	q.AddAfter("b", time.Second)
	clk.Step(time.Second)
	assert.Equal(t, []string{"b"}, drain(t, q))
}

func TestAddWithOptionsAfterNeverShouldParkTheKey(t *testing.T) {
	q, clk := newTestQueue(t)
	clk.Step(time.Minute)
	q.AddWithOptions(queue.AddOptions{After: math.MaxInt64, Priority: queue.PriorityHigh}, "a", "b")
	assert.Equal(t, 0, q.Len())
	// Parked while processing: runs again only when added again.
	q.Add("c")
	k := get(t, q)
	q.AddAfter("c", math.MaxInt64)
	q.Done(k)
	clk.Step(time.Hour)
	assert.Equal(t, 0, q.Len())
}

func TestAddRateLimitedWithAZeroRateBucketShouldParkTheKeyOnceTheBurstIsSpent(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithRateLimiter[string](backoff.NewBucket[string](0, 1, nil)))
	clk.Step(time.Minute)
	q.AddRateLimited("a") // the burst's one token
	q.AddRateLimited("b") // rate.InfDuration: never
	assert.Equal(t, []string{"a"}, drain(t, q))
	clk.Step(time.Hour)
	assert.Equal(t, 0, q.Len(), "b must wait forever, not retry at once")
}
