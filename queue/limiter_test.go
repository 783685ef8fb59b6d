package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The default rate limiter's token bucket (10 retries/s, burst 100) runs on
// the queue's clock, so past 100 failures the spacing follows a fake clock
// exactly instead of wall time.
func TestTheDefaultRateLimiterShouldFollowTheQueuesClockPastTheBurst(t *testing.T) {
	q, clk := newTestQueue(t)
	for i := range 100 {
		q.AddRateLimited(fmt.Sprint("burst-", i)) // each waits the per-key 5ms
	}
	q.AddRateLimited("over") // the bucket is empty: 100ms on the fake clock
	clk.Step(5 * time.Millisecond)
	require.Equal(t, 100, q.Len())
	drain(t, q)
	clk.Step(95*time.Millisecond - 1)
	assert.Equal(t, 0, q.Len(), "due 100ms after it was added, not earlier")
	clk.Step(1)
	assert.Equal(t, 1, q.Len())
	drain(t, q)

	// A fake second refills ten tokens: wall time does not matter.
	clk.Step(time.Second)
	for i := range 9 {
		q.AddRateLimited(fmt.Sprint("refilled-", i))
	}
	clk.Step(5 * time.Millisecond)
	assert.Equal(t, 9, q.Len(), "the refilled tokens cover nine retries at once")
}
