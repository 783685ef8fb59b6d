package workqueue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/workqueue"
)

// addWhy adds key with a reason.
func addWhy(q *workqueue.Queue[string], key string, what uint32, rev uint64) {
	q.AddWithOptions(workqueue.AddOptions{Reason: workqueue.Reason{What: what, Rev: rev}}, key)
}

// getWhy takes the next key, which must be ready, with its reasons.
func getWhy(t *testing.T, q *workqueue.Queue[string]) (string, *workqueue.Reasons) {
	t.Helper()
	require.Positive(t, q.Len(), "no key ready")
	var rs workqueue.Reasons
	k, shutdown := q.GetWithReasons(&rs)
	require.False(t, shutdown)
	return k, &rs
}

// whats returns the What and Count of each reason, in order.
func whats(rs []workqueue.Reason) [][2]uint32 {
	var out [][2]uint32
	for _, r := range rs {
		out = append(out, [2]uint32{r.What, r.Count})
	}
	return out
}

func TestReasonsShouldMergeDuplicateAddsCountingThemAndKeepingTheHighestRevision(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	addWhy(q, "a", 7, 10)
	addWhy(q, "a", 7, 30)
	addWhy(q, "a", 7, 20)
	addWhy(q, "a", 9, 5)
	q.Add("a") // an add without a reason records nothing

	k, rs := getWhy(t, q)
	assert.Equal(t, "a", k)
	require.Equal(t, 2, rs.Len())
	assert.Equal(t, [][2]uint32{{7, 3}, {9, 1}}, whats(rs.List()), "in the order they first occurred")
	assert.Equal(t, uint64(30), rs.List()[0].Rev)
	assert.Equal(t, uint64(5), rs.List()[1].Rev)
	assert.Zero(t, rs.Dropped)
}

func TestReasonsShouldKeepTheFirstFourAndCountTheRestAsDropped(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	for what := uint32(1); what <= 7; what++ {
		addWhy(q, "a", what, 0)
	}
	addWhy(q, "a", 1, 0) // merges into a kept one: not dropped

	_, rs := getWhy(t, q)
	assert.Equal(t, [][2]uint32{{1, 2}, {2, 1}, {3, 1}, {4, 1}}, whats(rs.List()))
	assert.Equal(t, uint32(3), rs.Dropped)
}

func TestReasonsShouldBeClearedWhenTheKeyIsHandedOutAndCollectAddsWhileItIsProcessed(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	addWhy(q, "a", 1, 0)
	_, rs := getWhy(t, q)
	require.Equal(t, 1, rs.Len())

	info, ok := q.Inspect("a")
	require.True(t, ok)
	assert.Equal(t, workqueue.Processing, info.Phase)
	assert.Zero(t, info.Reasons.Len(), "handed over with the key")

	addWhy(q, "a", 2, 0) // dirty: for the next run
	q.Done("a")
	_, rs = getWhy(t, q)
	assert.Equal(t, [][2]uint32{{2, 1}}, whats(rs.List()))
	q.Done("a")
	_, ok = q.Inspect("a")
	require.False(t, ok, "gone after Done")

	addWhy(q, "a", 3, 0) // a fresh entry, possibly the same slab slot
	_, rs = getWhy(t, q)
	assert.Equal(t, [][2]uint32{{3, 1}}, whats(rs.List()))
}

func TestReasonsOfADelayedKeyShouldMergeWithTheAddThatMakesItReady(t *testing.T) {
	q, clk := newTestQueue(t, workqueue.WithReasons(), workqueue.WithReadyTimes())
	q.AddWithOptions(workqueue.AddOptions{After: time.Minute, Reason: workqueue.Reason{What: 1}}, "a")
	first := clk.Now()
	clk.Step(time.Second)
	info, ok := q.Inspect("a")
	require.True(t, ok)
	assert.Equal(t, workqueue.Waiting, info.Phase)
	assert.Equal(t, [][2]uint32{{1, 1}}, whats(info.Reasons.List()), "Inspect shows them without taking them")
	addWhy(q, "a", 2, 0)

	_, rs := getWhy(t, q)
	assert.Equal(t, [][2]uint32{{1, 1}, {2, 1}}, whats(rs.List()))
	assert.Equal(t, first, rs.List()[0].First, "noted with ready times on")
	assert.Equal(t, first.Add(time.Second), rs.List()[1].First)
}

func TestReasonsShouldHaveNoFirstTimeWhenTheQueueNotesNoTimes(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	addWhy(q, "a", 1, 0)
	_, rs := getWhy(t, q)
	require.Equal(t, 1, rs.Len())
	assert.True(t, rs.List()[0].First.IsZero())
}

func TestAQueueWithoutWithReasonsShouldIgnoreReasons(t *testing.T) {
	q, _ := newTestQueue(t)
	addWhy(q, "a", 1, 0)
	info, _ := q.Inspect("a")
	assert.Zero(t, info.Reasons.Len())
	rs := &workqueue.Reasons{}
	addWhy(q, "b", 1, 0)
	_, _ = q.GetWithReasons(rs)
	assert.Zero(t, rs.Len())
}

func TestGetShouldAlsoClearTheReasonsItDoesNotReturn(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	addWhy(q, "a", 1, 0)
	require.Equal(t, "a", get(t, q))
	addWhy(q, "a", 2, 0)
	q.Done("a")
	_, rs := getWhy(t, q)
	assert.Equal(t, [][2]uint32{{2, 1}}, whats(rs.List()))
}

func TestReasonsShouldCostNoAllocationPerAddAndGet(t *testing.T) {
	q, _ := newTestQueue(t, workqueue.WithReasons())
	var rs workqueue.Reasons
	keys := []string{"a", "b", "c"}
	for _, k := range keys { // grow the slab first
		addWhy(q, k, 1, 1)
	}
	for range keys {
		k, _ := q.GetWithReasons(&rs)
		q.Done(k)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			addWhy(q, k, 1, 1)
			addWhy(q, k, 2, 2)
		}
		for range keys {
			k, _ := q.GetWithReasons(&rs)
			q.Done(k)
		}
	})
	assert.Zero(t, allocs)
}
