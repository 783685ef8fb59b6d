package workqueue

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func drainKeys(q *Queue[string]) []string {
	var keys []string
	for q.Len() > 0 {
		k, _ := q.Get()
		keys = append(keys, k)
		q.Done(k)
	}
	return keys
}

func TestStaleDelaySlotsShouldBeCompactedAwayAndNeverFire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	q := New[string](WithClock(clk))
	defer q.ShutDown()
	const n = 1000
	for i := range n {
		q.AddAfter(fmt.Sprint(i), 2*time.Hour)
		q.AddAfter(fmt.Sprint(i), time.Hour)   // earlier: the first slot goes stale
		q.AddAfter(fmt.Sprint(i), time.Minute) // and the second
	}
	q.mu.Lock()
	assert.LessOrEqual(t, len(q.delays), 2*n+64, "stale slots must never outnumber live ones by more than 64")
	q.mu.Unlock()
	for i := range n - 1 {
		q.Add(fmt.Sprint(i)) // ready now: its minute slot goes stale too
	}
	assert.Len(t, drainKeys(q), n-1)
	clk.Step(time.Minute)
	assert.Equal(t, []string{fmt.Sprint(n - 1)}, drainKeys(q), "only the one key still waiting may fire")
	clk.Step(time.Hour)
	assert.Empty(t, drainKeys(q))
	q.mu.Lock()
	assert.Empty(t, q.delays)
	assert.Equal(t, 0, q.stale)
	q.mu.Unlock()
}

func TestDelaySeqShouldKeepTheOrderAcrossItsWrapAround(t *testing.T) {
	for _, start := range []uint32{math.MaxUint32 - 3, seqEpoch - 3} {
		clk := clocktesting.NewFakeClock(time.Unix(0, 0))
		q := New[string](WithClock(clk))
		q.delaySeq = start
		want := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for _, k := range want {
			q.AddAfter(k, time.Second)
		}
		q.mu.Lock()
		for _, d := range q.delays {
			require.NotZero(t, d.seq, "seq 0 means no slot")
		}
		q.mu.Unlock()
		clk.Step(time.Second)
		assert.Equal(t, want, drainKeys(q), "start %d", start)
		q.ShutDown()
	}
}
