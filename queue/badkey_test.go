package queue_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// A key must equal itself and be hashable, or Done could never find it
// again: such keys are refused at Add with a panic naming the problem.

type withFloat struct {
	Name  string
	Score float64
}

func TestAddOfAKeyThatIsNotEqualToItselfShouldPanicNamingTheProblem(t *testing.T) {
	nan := math.NaN()
	q := must.Do(queue.New[float64]())
	t.Cleanup(q.ShutDown)
	assert.PanicsWithValue(t, "queue: key NaN is not equal to itself (it is or holds a NaN), so the queue could never find it again; use keys without NaN",
		func() { q.Add(nan) })
	assert.Panics(t, func() { q.AddAfter(nan, time.Second) })
	assert.Panics(t, func() { q.AddRateLimited(nan) })
	assert.Panics(t, func() { q.AddWithOptions(queue.AddOptions{}, 1, nan) })
	assert.Equal(t, 1, q.Len(), "the keys before the bad one are added")
	assert.NotPanics(t, func() { q.Done(nan) }, "Done of a key that is not processing does nothing")
	assert.True(t, q.ShuttingDown() == false)
	assert.Equal(t, 0, q.NumRequeues(nan), "a refused key counts no failure")

	s := must.Do(queue.New[withFloat]())
	t.Cleanup(s.ShutDown)
	assert.PanicsWithValue(t, "queue: key {a NaN} is not equal to itself (it is or holds a NaN), so the queue could never find it again; use keys without NaN",
		func() { s.Add(withFloat{"a", nan}) })

	i := must.Do(queue.New[any]())
	t.Cleanup(i.ShutDown)
	assert.Panics(t, func() { i.Add(nan) })
	assert.Panics(t, func() { i.Add(withFloat{"a", nan}) })
}

func TestAddOfAnUnhashableInterfaceKeyShouldPanicNamingTheProblem(t *testing.T) {
	q := must.Do(queue.New[any]())
	t.Cleanup(q.ShutDown)
	assert.PanicsWithValue(t, "queue: key [1 2] of type []int cannot be compared or hashed, so it cannot be a queue key: runtime error: comparing uncomparable type []int",
		func() { q.Add([]int{1, 2}) })
	assert.Panics(t, func() { q.Add(map[string]int{}) })
	assert.Panics(t, func() { q.Add(func() {}) })
	assert.Panics(t, func() { q.AddAfter([]int{1}, time.Second) })
	assert.NotPanics(t, func() { q.Done([]int{1}) })
	q.Add("fine")
	q.Add(1.5)
	assert.Equal(t, 2, q.Len())
}

func TestKeysThatCannotBeUsedShouldNotHangShutDownWithDrain(t *testing.T) {
	q := must.Do(queue.New[float64]())
	func() {
		defer func() { _ = recover() }() // the delivery path recovers and logs
		q.Add(math.NaN())
	}()
	if q.Len() > 0 { // the key was admitted: a worker takes it and gives it back
		k, _ := q.Get()
		q.Done(k)
	}
	assert.True(t, q.Idle(), "Done must find every key Get handed out")
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		q.ShutDown() // release the drain so the test can end
		<-drained
		t.Fatal("ShutDownWithDrain hung on a key Done could not find")
	}
}
