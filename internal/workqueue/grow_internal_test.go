package workqueue

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGrowShouldLetTheQueueTakeThatManyKeysWithoutReallocatingItsSlab(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"plain", []Option{WithAgeing(NoAgeing)}},
		{"with ageing and ready times", []Option{WithReadyTimes()}},
		{"with reasons", []Option{WithReasons()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New[string](tc.opts...)
			defer q.ShutDown()
			q.Add("before") // a key already held keeps its place
			const n = 5000
			q.Grow(n)
			entries := cap(q.slab.entries)
			require.GreaterOrEqual(t, entries, n+1)
			for i := range n {
				q.Add(strconv.Itoa(i))
			}
			assert.Equal(t, entries, cap(q.slab.entries), "the slab was not reallocated")
			if q.slab.times != nil {
				assert.GreaterOrEqual(t, cap(q.slab.times), n+1)
			}
			if q.slab.reasons != nil {
				assert.GreaterOrEqual(t, cap(q.slab.reasons), n+1)
			}
			require.Equal(t, n+1, q.Len())
			for i := -1; i < n; i++ {
				want := "before"
				if i >= 0 {
					want = strconv.Itoa(i)
				}
				k, shutdown := q.Get()
				require.False(t, shutdown)
				require.Equal(t, want, k, "keys come out in the order they were added")
				q.Done(k)
			}
		})
	}
}

func TestGrowShouldKeepDelayedKeysFindable(t *testing.T) {
	q := New[int](WithAgeing(NoAgeing))
	defer q.ShutDown()
	for i := range 100 {
		q.AddAfter(i, 1<<40) // parked far in the future: dues exist
	}
	q.Grow(10_000)
	assert.GreaterOrEqual(t, cap(q.slab.dues), 10_100)
	for i := range 100 {
		q.Add(i) // found, not added a second time
	}
	assert.Equal(t, 100, q.Len())
}

func TestGrowShouldIgnoreNonPositiveHintsAndAShutDownQueue(t *testing.T) {
	q := New[int]()
	q.Grow(0)
	q.Grow(-5)
	assert.Equal(t, minIndexSlots, len(q.index.slots))
	assert.Zero(t, cap(q.slab.entries))
	q.ShutDown()
	q.Grow(1000)
	assert.Zero(t, cap(q.slab.entries))
}

func TestGrowShouldKeepTheRoomWhenTheQueueEmptiesBeforeTheKeysAnnouncedHaveCome(t *testing.T) {
	q := New[int](WithAgeing(NoAgeing))
	defer q.ShutDown()
	const n = 4 * shrinkAbove
	q.Grow(n)
	entries := cap(q.slab.entries)
	for i := range n - 1 {
		q.Add(i)
		k, _ := q.Get()
		q.Done(k) // the queue is empty again after every key
	}
	assert.Equal(t, entries, cap(q.slab.entries), "the slab was kept and not regrown")
	assert.Equal(t, minIndexSlots, len(q.index.slots), "the index follows the keys held, not the room")

	// The last announced key came: the emptied queue gives its memory back.
	q.Add(-1)
	k, _ := q.Get()
	q.Done(k)
	assert.Zero(t, cap(q.slab.entries))
	assert.Equal(t, minIndexSlots, len(q.index.slots))
}

func TestEndGrowShouldLetAnEmptiedQueueGiveBackTheRoomOfKeysThatNeverCame(t *testing.T) {
	q := New[int](WithAgeing(NoAgeing))
	defer q.ShutDown()
	q.Grow(4 * shrinkAbove)
	q.Add(1)
	k, _ := q.Get()
	q.Done(k)
	require.NotZero(t, cap(q.slab.entries), "reserved: kept while keys are announced")
	q.EndGrow()
	q.Add(2)
	k, _ = q.Get()
	q.Done(k)
	assert.Zero(t, cap(q.slab.entries))
	assert.Equal(t, minIndexSlots, len(q.index.slots))
}

func TestGrowToShouldReserveOnlyTheKeysNotHeldYet(t *testing.T) {
	q := New[int](WithAgeing(NoAgeing))
	defer q.ShutDown()
	for i := range 100 {
		q.Add(i)
	}
	q.GrowTo(10_000)
	assert.GreaterOrEqual(t, cap(q.slab.entries), 10_000)
	assert.Equal(t, 9_900, q.slab.reserve)
	q.GrowTo(50) // fewer than held: nothing to do
	assert.Equal(t, 9_900, q.slab.reserve)
}
