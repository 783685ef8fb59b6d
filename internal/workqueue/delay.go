package workqueue

import (
	"math"
	"time"

	"k8s.io/utils/clock"
)

// Delayed keys sit in one min-heap by due time. One goroutine and one timer
// serve the whole heap: the timer is armed for the head only. Get and Len
// also promote due keys themselves, so a worker that is already awake never
// waits for that goroutine to be scheduled.
//
// The heap deletes lazily. An entry records the seq of its one live heap
// slot (entry.waitSeq); "the earliest time wins" pushes a new slot and
// "a plain Add makes a waiting key ready now" clears waitSeq, and slots whose
// seq no longer matches are skipped when they reach the top. So sifting
// touches only the heap's own memory, never the entries: with a million
// delayed keys, writing back heap positions into the entries cost a cache
// miss per level. Stale slots are compacted away once they are half the heap.

// delayed is one heap slot.
type delayed struct {
	due int64 // Queue.nanos at which the key becomes ready
	idx int32
	// seq numbers due times in the order they were set: it orders keys
	// with equal due times, and the slot is live only while it equals the
	// entry's waitSeq. Never 0.
	seq uint32
}

// before is the heap order: earlier due time, then earlier seq.
func (a delayed) before(b delayed) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return int32(a.seq-b.seq) < 0
}

// never is the armed time when the timer goroutine waits for nothing.
const never = math.MaxInt64

// seqEpoch bounds the age of a stale slot: every time delaySeq crosses a
// multiple of it the heap is compacted, so a stale slot never lives to see
// its seq handed out again after delaySeq wraps (2^32 > 2*seqEpoch).
const seqEpoch = 1 << 30

func (q *Queue[K]) nextSeq() uint32 {
	q.delaySeq++
	if q.delaySeq%seqEpoch == 0 {
		q.compactDelays()
		if q.delaySeq == 0 {
			q.delaySeq = 1
		}
	}
	return q.delaySeq
}

// wait puts idx, which has no live slot, in the heap until due.
func (q *Queue[K]) wait(idx int32, due int64) {
	if q.slab.dues == nil {
		q.slab.dues = make([]int64, len(q.slab.entries), cap(q.slab.entries))
	}
	seq := q.nextSeq()
	q.slab.entries[idx].waitSeq = seq
	q.slab.dues[idx] = due
	q.delays = append(q.delays, delayed{due: due, idx: idx, seq: seq})
	q.siftUp(len(q.delays) - 1)
	if due < q.armed {
		q.wakeTimer()
	}
}

// waitEarlier moves idx's due time to due if that is earlier.
func (q *Queue[K]) waitEarlier(idx int32, due int64) {
	if due >= q.slab.dues[idx] {
		return
	}
	q.unwait(idx)
	q.wait(idx, due)
}

// unwait takes idx out of the heap.
func (q *Queue[K]) unwait(idx int32) {
	q.slab.entries[idx].waitSeq = 0
	q.stale++
	q.compactIfStale()
}

func (q *Queue[K]) compactIfStale() {
	if q.stale > 64 && q.stale*2 > len(q.delays) {
		q.compactDelays()
	}
}

// compactDelays drops the stale slots and re-heapifies, in O(n).
func (q *Queue[K]) compactDelays() {
	es, live := q.slab.entries, q.delays[:0]
	for _, d := range q.delays {
		if int(d.idx) < len(es) && es[d.idx].waitSeq == d.seq {
			live = append(live, d)
		}
	}
	clear(q.delays[len(live):])
	q.delays, q.stale = live, 0
	for i := len(live)/2 - 1; i >= 0; i-- {
		q.siftDown(i)
	}
}

func (q *Queue[K]) siftUp(i int) {
	h := q.delays
	d := h[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !d.before(h[parent]) {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = d
}

func (q *Queue[K]) siftDown(i int) {
	h := q.delays
	n := len(h)
	d := h[i]
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && h[right].before(h[child]) {
			child = right
		}
		if !h[child].before(d) {
			break
		}
		h[i] = h[child]
		i = child
	}
	h[i] = d
}

// promoteDue moves every key due at or before now out of the heap and
// reports how many became ready. The caller holds q.mu and releases it with
// unlock, which hands them to parked Gets.
func (q *Queue[K]) promoteDue(now int64) (readied int) {
	for len(q.delays) > 0 && q.delays[0].due <= now {
		top := q.delays[0]
		last := len(q.delays) - 1
		q.delays[0] = q.delays[last]
		q.delays = q.delays[:last]
		if last > 0 {
			q.siftDown(0)
		}
		e := &q.slab.entries[top.idx]
		if e.waitSeq != top.seq {
			q.stale--
			continue
		}
		e.waitSeq = 0
		switch e.state {
		case stateWaiting:
			q.makeReady(top.idx, e.prio, now)
			q.adds++
			readied++
		case stateProcessing:
			e.state = stateDirty
			q.adds++
		}
	}
	if len(q.delays) == 0 && cap(q.delays) > shrinkAbove {
		q.delays = nil
	}
	return readied
}

// promoteAt is promoteIfDue for callers that have read the clock already
// (now is 0 when they have not). Every caller that knows the time moves due
// keys, so that they do not wait for the timer goroutine to be scheduled
// behind busy goroutines.
func (q *Queue[K]) promoteAt(now int64) int {
	if now == 0 || len(q.delays) == 0 || q.shuttingDown || q.delays[0].due > now {
		return 0
	}
	return q.promoteDue(now)
}

// promoteIfDue makes due keys ready, so that callers that are awake do not
// wait for the timer goroutine. Called with q.mu held; it reads the clock only
// when keys are waiting.
func (q *Queue[K]) promoteIfDue() (readied int) {
	if len(q.delays) == 0 || q.shuttingDown {
		return 0
	}
	if now := q.nanos(); q.delays[0].due <= now {
		return q.promoteDue(now)
	}
	return 0
}

// wakeTimer tells the timer goroutine to re-arm, starting it on first use so
// that a queue that never delays anything owns no goroutine. Called with q.mu
// held.
func (q *Queue[K]) wakeTimer() {
	if q.shuttingDown {
		return
	}
	if !q.timerStarted {
		q.timerStarted = true
		go q.runTimer()
		return
	}
	select {
	case q.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// runTimer promotes due keys whenever the head of the heap comes due, until
// ShutDown closes q.stop.
func (q *Queue[K]) runTimer() {
	defer close(q.timerDone)
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		q.mu.Lock()
		if q.shuttingDown {
			q.mu.Unlock()
			return
		}
		now := q.nanos()
		q.promoteDue(now)
		q.armed = never
		if len(q.delays) > 0 {
			q.armed = q.delays[0].due
		}
		armed := q.armed
		q.unlock(q.metricsNow())

		var fire <-chan time.Time
		if armed != never {
			timer, fire = q.arm(timer, armed, now)
		}
		select {
		case <-fire:
		case <-q.wake:
			if timer != nil {
				timer.Stop()
			}
		case <-q.stop:
			return
		}
	}
}

// armSlack is how far the clock may move while the timer is being armed
// before arm tries again. Timers are relative, so a clock that moves between
// reading it and arming delays the wake-up by that much: nanoseconds on the
// real clock, but a whole Step on a fake one, which would leave a test's Get
// asleep with its key due.
const armSlack = int64(time.Millisecond)

// arm sets timer to fire at due, given that the clock read now, and returns
// the channel to wait on; a nil timer is created.
func (q *Queue[K]) arm(timer clock.Timer, due, now int64) (clock.Timer, <-chan time.Time) {
	for {
		d := time.Duration(due - now)
		if timer == nil {
			timer = q.clock.NewTimer(d)
		} else {
			rearm(timer, d)
		}
		after := q.nanos()
		if after >= due {
			// Due already: don't wait for the timer to say so.
			timer.Stop()
			return timer, closedTimeChan
		}
		if after-now <= armSlack {
			return timer, timer.C()
		}
		timer.Stop()
		now = after
	}
}

// rearm resets a timer that may have fired unread. Real timers drop a
// stale tick on Reset since Go 1.23, but a fake clock's do not, and its Step
// blocks, holding the clock's lock, to send a second tick into a full
// channel: the timer goroutine then deadlocks on the clock. So: stop, drain,
// then reset, and the channel is empty whenever the timer is armed.
func rearm(timer clock.Timer, d time.Duration) {
	timer.Stop()
	select {
	case <-timer.C():
	default:
	}
	timer.Reset(d)
}

// closedTimeChan is always ready to receive from.
var closedTimeChan = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()
