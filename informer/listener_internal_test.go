package informer

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

func add(v int, initial bool) change[int] {
	return change[int]{kind: kindAdd, cur: v, initialList: initial}
}
func update(old, v int) change[int] { return change[int]{kind: kindUpdate, old: old, cur: v} }
func del(last int) change[int]      { return change[int]{kind: kindDelete, old: last, cur: last} }
func resync(v int) change[int]      { return change[int]{kind: kindUpdate, old: v, cur: v, resync: true} }

func TestMergeTakesTheHandlerFromWhatItHadToTheLatestState(t *testing.T) {
	none := change[int]{kind: kindNone}
	for _, tc := range []struct {
		name          string
		pending, next change[int]
		want          change[int]
	}{
		{"add then update is an add of the latest", add(1, true), update(1, 2), add(2, false)},
		{"add then delete is nothing", add(1, false), del(1), none},
		{"update then update keeps the handler's old", update(1, 2), update(2, 3), update(1, 3)},
		{"update then delete is a delete with the last", update(1, 2), del(2), change[int]{kind: kindDelete, old: 1, cur: 2}},
		{"delete then add is an update from the handler's old", change[int]{kind: kindDelete, old: 1, cur: 2}, add(3, false), update(1, 3)},
		{"nothing then add is an add", none, add(4, false), add(4, false)},
		{"nothing then delete stays nothing", none, del(4), none},
		{"delete then delete keeps the latest last", del(1), del(2), change[int]{kind: kindDelete, old: 1, cur: 2}},
		{"resync then resync is a resync", resync(1), resync(1), resync(1)},
		{"resync then a change is a change", resync(1), update(1, 2), update(1, 2)},
		{"a change then a resync is still a change", update(1, 2), resync(2), update(1, 2)},
		{"delete then a relisted add is a change", del(1), add(1, false), update(1, 1)},
		{"add then resync is still an add", add(1, true), resync(1), add(1, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, merge(tc.pending, tc.next))
		})
	}
}

func TestListenerKeepsOneEntryPerKeyInFirstChangeOrder(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	l.push("a", add(1, false))
	l.push("b", add(1, false))
	for i := range 100 {
		l.push("a", update(i, i+1))
		l.push("a", del(i+1))
		l.push("a", add(i+2, false))
	}
	l.push("c", add(1, false))
	l.push("b", del(1))
	assert.Equal(t, 3, l.pendingLen())
	assert.Len(t, l.line, 3)

	k, c, ok := l.next() // does not wait: keys are pending
	assert.True(t, ok)
	assert.Equal(t, "a", k)
	assert.Equal(t, add(101, false), c)
	k, c, ok = l.next() // b was added and deleted: skipped
	assert.True(t, ok)
	assert.Equal(t, "c", k)
	assert.Equal(t, add(1, false), c)
	assert.Equal(t, uint64(1), l.taken, "the skipped key counts as taken")
}

func TestListenerResyncSkipsKeysAlreadyPending(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	l.push("a", update(1, 2))
	l.resync("a", 2, 0)
	l.resync("b", 5, 0)
	assert.Equal(t, update(1, 2), l.pending["a"])
	assert.Equal(t, resync(5), l.pending["b"])
}

func TestListenerSyncsWhenEverythingPushedBeforeTheMarkIsDelivered(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	l.push("a", add(1, true))
	l.push("b", add(1, true))
	l.markSync()
	l.push("c", add(1, false))
	assert.False(t, l.hasSynced())
	l.taken = 1
	l.checkSyncLocked()
	assert.False(t, l.hasSynced())
	l.taken = 2
	l.checkSyncLocked()
	assert.True(t, l.hasSynced(), "c, pushed after the mark, does not hold it up")
}

func TestListenerShouldDropItsBufferOnceABurstHasDrained(t *testing.T) {
	l := newListener[int, int](HandlerFuncs[int, int]{}, nil)
	const burst = 3 * dropBufferAbove
	for k := range burst {
		l.push(k, add(k, true))
	}
	for range burst - 1 {
		_, _, ok := l.next()
		assert.True(t, ok)
	}
	assert.Equal(t, burst, l.peak, "the buffer is kept while keys are pending")
	_, _, ok := l.next()
	assert.True(t, ok)
	assert.Zero(t, l.peak)
	assert.Nil(t, l.line, "the drained line's array is released")
	assert.Empty(t, l.pending)

	l.push(1, add(1, false)) // still usable
	k, c, ok := l.next()
	assert.True(t, ok)
	assert.Equal(t, 1, k)
	assert.Equal(t, add(1, false), c)
}

func TestListenerShouldDeliverAChangeToAKeyStillInBulkAfterItsAdd(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	l.mu.Lock()
	assert.True(t, l.startBulkLocked(2))
	l.pushBulkLocked("a", add(1, true))
	l.pushBulkLocked("b", add(1, true))
	l.endBulkLocked() // as fill does
	l.mu.Unlock()
	l.push("a", update(1, 2)) // a watch event while the initial list is undelivered
	l.markSync()

	var got []string
	for range 3 {
		k, c, ok := l.next()
		assert.True(t, ok)
		got = append(got, fmt.Sprintf("%s %v %d->%d", k, c.kind, c.old, c.cur))
		l.mu.Lock()
		l.taken++
		l.checkSyncLocked()
		l.mu.Unlock()
	}
	assert.Equal(t, []string{
		fmt.Sprintf("a %v 0->1", kindAdd),
		fmt.Sprintf("b %v 0->1", kindAdd),
		fmt.Sprintf("a %v 1->2", kindUpdate),
	}, got)
	assert.True(t, l.hasSynced())
	assert.Nil(t, l.bulk, "a delivered bulk is released")

	l.mu.Lock()
	l.pushLocked("c", add(3, false))
	assert.False(t, l.startBulkLocked(1), "a buffer with pending keys is not filled in bulk")
	l.mu.Unlock()
}

func TestAReplayShouldGiveEachKeyItsAddBeforeItsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
		l.replaying = true
		got := replayed(l)

		// Changes made before the replay reached their keys: the handler
		// never had a, so its update is an add; d's delete is nothing.
		l.push("a", update(1, 2))
		l.push("d", del(4))
		l.push("c", add(3, false))
		l.mu.Lock()
		l.replayed = map[string]struct{}{}
		l.replayLocked("a", item[int]{value: 2}) // pending: told through its change
		l.replayLocked("b", item[int]{value: 1})
		l.mu.Unlock()
		l.wake() // as replay does after each chunk
		synctest.Wait()
		assert.Equal(t, []string{fmt.Sprintf("b %v 0->1", kindAdd)}, drain(got), "the replay is delivered as it is built")

		// Changes to a key the replay has given: after its add.
		l.push("b", update(1, 5))
		l.push("b", del(5))
		l.push("b", add(6, false)) // created again: the replay may meet it twice
		l.mu.Lock()
		l.replayLocked("b", item[int]{value: 6})
		l.replayLocked("e", item[int]{value: 7})
		l.mu.Unlock()
		l.wake()
		synctest.Wait()
		assert.Equal(t, []string{fmt.Sprintf("e %v 0->7", kindAdd)}, drain(got), "changes wait for the replay")
		assert.False(t, l.hasSynced())
		assert.False(t, l.idle())

		l.mu.Lock()
		l.endReplayLocked()
		l.mu.Unlock()
		l.wake()
		synctest.Wait()
		assert.Equal(t, []string{
			fmt.Sprintf("a %v 0->2", kindAdd),
			fmt.Sprintf("c %v 0->3", kindAdd),
			fmt.Sprintf("b %v 1->6", kindUpdate),
		}, drain(got))
		assert.True(t, l.hasSynced())
		assert.True(t, l.idle())
		l.halt(true)
		synctest.Wait()
	})
}

// replayed takes l's changes as its dispatcher would, counting each as
// taken, and sends each as "key kind old->cur" on the channel it returns,
// closed when l halts.
func replayed(l *listener[string, int]) <-chan string {
	got := make(chan string, 10)
	go func() {
		for {
			k, c, ok := l.next()
			if !ok {
				close(got)
				return
			}
			got <- fmt.Sprintf("%s %v %d->%d", k, c.kind, c.old, c.cur)
			l.mu.Lock()
			l.taken++
			l.checkSyncLocked()
			l.mu.Unlock()
		}
	}()
	return got
}

// drain returns what is in ch now.
func drain(ch <-chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

func TestAReplayShouldBuildItsSetOfReplayedKeysOnlyWhenAChangeComesAndStillGiveEachKeyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
		l.replaying = true
		got := replayed(l)

		l.mu.Lock()
		l.replayLocked("a", item[int]{value: 1})
		l.replayLocked("b", item[int]{value: 2})
		assert.Nil(t, l.replayed, "no change yet: the keys need no set")
		assert.Equal(t, []string{"a", "b"}, l.replayedKeys)
		l.mu.Unlock()

		// b is deleted and created again, c (not reached yet) updated:
		// the first change makes the set, which knows a and b.
		l.push("b", del(2))
		l.push("b", add(6, false))
		l.push("c", update(3, 4))
		l.mu.Lock()
		assert.Equal(t, map[string]struct{}{"a": {}, "b": {}}, l.replayed)
		assert.Nil(t, l.replayedKeys)
		l.replayLocked("b", item[int]{value: 6}) // met again: given once
		l.replayLocked("c", item[int]{value: 4}) // pending: told through its change
		l.replayLocked("d", item[int]{value: 5})
		l.endReplayLocked()
		assert.Nil(t, l.replayed)
		l.mu.Unlock()
		l.wake()
		synctest.Wait()
		assert.Equal(t, []string{
			fmt.Sprintf("a %v 0->1", kindAdd),
			fmt.Sprintf("b %v 0->2", kindAdd),
			fmt.Sprintf("d %v 0->5", kindAdd),
			fmt.Sprintf("b %v 2->6", kindUpdate),
			fmt.Sprintf("c %v 0->4", kindAdd),
		}, drain(got))
		assert.True(t, l.hasSynced())
		l.halt(true)
		synctest.Wait()
	})
}

func TestAFillShouldKeepItsBulkRoomWhenTheDispatcherCatchesUpBetweenChunks(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	const n = 3 * fillChunk
	l.mu.Lock()
	assert.True(t, l.startBulkLocked(n))
	l.pushBulkLocked("a", add(1, true))
	l.mu.Unlock()

	k, _, ok := l.next() // the dispatcher has taken the first chunk
	assert.True(t, ok)
	assert.Equal(t, "a", k)

	l.mu.Lock()
	l.pushBulkLocked("b", add(2, true)) // the next chunk
	assert.GreaterOrEqual(t, cap(l.bulk), n, "the room for the whole list is kept, not regrown chunk by chunk")
	l.mu.Unlock()
	k, _, ok = l.next()
	assert.True(t, ok)
	assert.Equal(t, "b", k)

	l.mu.Lock()
	l.endBulkLocked()
	assert.Nil(t, l.bulk, "once the fill ended and bulk is delivered, its room goes")
	l.mu.Unlock()
}

func TestAFillThatEndsBeforeItsBulkIsDeliveredShouldStillDeliverItAll(t *testing.T) {
	l := newListener[string, int](HandlerFuncs[string, int]{}, nil)
	l.mu.Lock()
	assert.True(t, l.startBulkLocked(2))
	l.pushBulkLocked("a", add(1, true))
	l.pushBulkLocked("b", add(2, true))
	l.endBulkLocked()
	l.mu.Unlock()
	for _, want := range []string{"a", "b"} {
		k, c, ok := l.next()
		assert.True(t, ok)
		assert.Equal(t, want, k)
		assert.True(t, c.initialList)
	}
	l.mu.Lock()
	assert.Nil(t, l.bulk, "the last take drops the room of a fill that ended")
	l.mu.Unlock()
}
