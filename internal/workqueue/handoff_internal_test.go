package workqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parkedGets is how many Gets wait for a hand-off.
func (q *Queue[K]) parkedGets() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.parked)
}

func TestAParkedGetWithReasonsShouldBeHandedTheReasonsOfTheKeyAnAddReadies(t *testing.T) {
	q := New[string](WithReasons())
	defer q.ShutDown()
	type got struct {
		key string
		rs  Reasons
	}
	out := make(chan got, 1)
	go func() {
		var g got
		g.key, _ = q.GetWithReasons(&g.rs)
		out <- g
	}()
	// Wait for the state, not for a time: the Get has parked.
	require.Eventually(t, func() bool { return q.parkedGets() == 1 }, time.Minute, time.Millisecond)

	q.AddWithOptions(AddOptions{Reason: Reason{What: 7, Rev: 42}}, "a") // hands "a" to the parked Get

	g := <-out
	assert.Equal(t, "a", g.key)
	require.Equal(t, 1, g.rs.Len(), "the reason travels with the handed-off key")
	assert.Equal(t, uint32(7), g.rs.List()[0].What)
	assert.Equal(t, uint64(42), g.rs.List()[0].Rev)
}
