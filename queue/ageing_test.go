package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/queue"
)

// saturate keeps the normal lane busy for d in steps of step: each step adds
// a fresh normal key, advances the clock and serves one key. It returns the
// keys served, in order.
func saturate(t *testing.T, q *queue.Queue[string], step func(time.Duration), d, every time.Duration) []string {
	t.Helper()
	var served []string
	for i := 0; time.Duration(i)*every < d; i++ {
		q.Add(fmt.Sprintf("normal-%d", i))
		q.Add(fmt.Sprintf("normal-%d-bis", i))
		step(every)
		k := get(t, q)
		served = append(served, k)
		q.Done(k)
	}
	return served
}

func TestALowPriorityKeyShouldBeServedOnceItHasWaitedTheAgeingBound(t *testing.T) {
	q, clk := newTestQueue(t)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "listed")
	served := saturate(t, q, clk.Step, 2*time.Minute, 100*time.Millisecond)
	i := indexOf(served, "listed")
	require.GreaterOrEqual(t, i, 0, "the low key starved behind %d normal keys", len(served))
	at := time.Duration(i+1) * 100 * time.Millisecond
	assert.Equal(t, 30*time.Second, at, "served at the first Get once it had waited the default bound")
}

func indexOf(s []string, k string) int {
	for i, v := range s {
		if v == k {
			return i
		}
	}
	return -1
}

func TestWithAgeingShouldSetTheBoundAndZeroShouldMeanTheDefault(t *testing.T) {
	for _, tt := range []struct {
		bound, want time.Duration
	}{{time.Second, time.Second}, {0, queue.DefaultAgeing}, {-time.Second, queue.DefaultAgeing}} {
		q, clk := newTestQueue(t, queue.WithAgeing(tt.bound))
		q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "listed")
		served := saturate(t, q, clk.Step, 2*queue.DefaultAgeing, 100*time.Millisecond)
		i := indexOf(served, "listed")
		require.GreaterOrEqual(t, i, 0, "bound %v: starved", tt.bound)
		assert.Equal(t, tt.want, time.Duration(i+1)*100*time.Millisecond, "bound %v", tt.bound)
	}
}

func TestNoAgeingShouldKeepPrioritiesStrict(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithAgeing(queue.NoAgeing))
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "listed")
	served := saturate(t, q, clk.Step, 2*queue.DefaultAgeing, 100*time.Millisecond)
	assert.Equal(t, -1, indexOf(served, "listed"))
	assert.Equal(t, len(served)+1, q.Len(), "the low key and the normal backlog are still there")
}

func TestAgedKeysShouldBeServedOldestFirstWhateverTheirPriority(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithAgeing(time.Second))
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "low-1")
	q.AddWithOptions(queue.AddOptions{Priority: -5}, "mid-1")
	clk.Step(100 * time.Millisecond)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "low-2")
	served := saturate(t, q, clk.Step, 3*time.Second, 100*time.Millisecond)
	first := []int{indexOf(served, "low-1"), indexOf(served, "mid-1"), indexOf(served, "low-2")}
	assert.Equal(t, []int{8, 9, 10}, first, "one per Get once aged (the first at 1s), in the order they became ready")
}

func TestAKeyReadyAloneWithItsPriorityShouldAgeFromWhenAnotherPriorityIsReady(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithAgeing(time.Second))
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "listed")
	clk.Step(time.Hour) // nobody took it, but nothing passed it either
	served := saturate(t, q, clk.Step, 3*time.Second, 100*time.Millisecond)
	assert.Equal(t, 9, indexOf(served, "listed"), "served a bound after the normal lane started, not at once")
}

func TestAKeyRaisedToAHigherPriorityShouldKeepItsAge(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithAgeing(time.Second))
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "a")
	q.Add("n")
	clk.Step(500 * time.Millisecond)
	q.AddWithOptions(queue.AddOptions{Priority: -5}, "a") // raised: to the back of -5
	served := saturate(t, q, clk.Step, 2*time.Second, 100*time.Millisecond)
	assert.Equal(t, 4, indexOf(served, "a"), "aged one second after it first became ready")
}

func TestAnAgedKeyShouldBeServedAheadOfItsGroupsTurn(t *testing.T) {
	tenant := func(k string) string { return k[:1] }
	q, clk := newTestQueue(t, queue.WithAgeing(time.Second), queue.WithGroup(tenant))
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "x-low")
	served := saturate(t, q, clk.Step, 2*time.Second, 100*time.Millisecond)
	assert.Equal(t, 9, indexOf(served, "x-low"))
}

func TestAgeingShouldNotReorderKeysOfOnePriority(t *testing.T) {
	q, clk := newTestQueue(t, queue.WithAgeing(time.Second))
	for i := range 5 {
		q.Add(fmt.Sprint(i))
		clk.Step(time.Hour)
	}
	assert.Equal(t, []string{"0", "1", "2", "3", "4"}, drain(t, q))
}
