package workqueue

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parkStalled parks a Get whose goroutine never runs: what a woken worker
// looks like while it waits for a processor.
func parkStalled[K comparable](q *Queue[K], dst *Reasons) *waiter[K] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.park(dst)
}

func TestAGetThatFindsNothingReadyShouldTakeAKeyHandedToAGetThatHasNotRunYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string]()
		defer q.ShutDown()
		parkStalled(q, nil)
		q.Add("a") // handed to the stalled Get

		got := make(chan string, 1)
		go func() {
			k, _ := q.Get()
			got <- k
		}()
		synctest.Wait()

		select {
		case k := <-got:
			assert.Equal(t, "a", k, "the running Get takes the stranded key")
		default:
			t.Fatal("Get parked while a handed key waited for a Get that had not run")
		}
	})
}

func TestAStalledGetWhoseKeyWasTakenShouldGetTheNextKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string]()
		defer q.ShutDown()
		// A real Get parks, is handed "a", and is beaten to it by another.
		first := make(chan string, 1)
		go func() {
			k, _ := q.Get()
			first <- k
		}()
		synctest.Wait()
		require.Equal(t, 1, q.parkedGets())
		q.mu.Lock()
		w := q.parked[0]
		q.addLocked("a", q.tag("a"), PriorityNormal, 0, 0)
		chain := q.handOff(0)
		key, ok := q.steal(nil) // as a running Get would, before the woken one runs
		q.mu.Unlock()
		require.True(t, ok)
		require.Equal(t, "a", key)
		wake(chain)
		synctest.Wait()

		select {
		case k := <-first:
			t.Fatalf("the robbed Get returned %q; it should wait for another key", k)
		default:
		}
		assert.Equal(t, waiterParked, int(w.state.Load()), "it parked again on its recycled waiter")
		q.Add("b")
		assert.Equal(t, "b", <-first)
	})
}

func TestAStolenKeyShouldCarryItsReasonsToTheGetThatTookIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string](WithReasons())
		defer q.ShutDown()
		var stalledReasons Reasons
		parkStalled(q, &stalledReasons)
		q.AddWithOptions(AddOptions{Reason: Reason{What: 3, Rev: 9}}, "a")

		var rs Reasons
		k, _ := q.GetWithReasons(&rs) // steals: nothing else is ready

		assert.Equal(t, "a", k)
		require.Equal(t, 1, rs.Len())
		assert.Equal(t, uint32(3), rs.List()[0].What)
		assert.Equal(t, uint64(9), rs.List()[0].Rev)
	})
}
