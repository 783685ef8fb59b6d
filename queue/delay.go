package queue

import (
	"math"
	"time"

	"k8s.io/utils/clock"
)

// Delayed keys sit in one min-heap by due time, indexed from the entries
// (entry.heapPos) so that "the earliest time wins" is a decrease-key and "a
// plain Add makes a waiting key ready now" is a removal, both O(log n). One
// goroutine and one timer serve the whole heap: the timer is armed for the
// head only. Get also promotes due keys itself, so a worker that is already
// awake never waits for that goroutine to be scheduled.

// delayed is one heap slot. The due time is kept in the slot rather than the
// entry so that sifting touches only the heap's own memory.
type delayed struct {
	due int64 // Queue.nanos at which the key becomes ready
	idx int32
	// seq orders keys with equal due times: the one whose time was set
	// first comes out first. It wraps; compared as a difference it stays
	// right while fewer than 2^31 times are set between two keys.
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

func (q *Queue[K]) heapPush(idx int32, due int64) {
	es := q.slab.entries
	es[idx].heapPos = int32(len(q.delays))
	q.delaySeq++
	q.delays = append(q.delays, delayed{due: due, idx: idx, seq: q.delaySeq})
	q.heapUp(len(q.delays) - 1)
	if due < q.armed {
		q.wakeTimer()
	}
}

// heapEarlier moves idx's due time to due if that is earlier.
func (q *Queue[K]) heapEarlier(idx int32, due int64) {
	pos := int(q.slab.entries[idx].heapPos)
	if due >= q.delays[pos].due {
		return
	}
	q.delaySeq++
	q.delays[pos].due, q.delays[pos].seq = due, q.delaySeq
	q.heapUp(pos)
	if due < q.armed {
		q.wakeTimer()
	}
}

func (q *Queue[K]) heapRemove(idx int32) {
	es := q.slab.entries
	pos := int(es[idx].heapPos)
	last := len(q.delays) - 1
	if pos != last {
		q.heapSwap(pos, last)
	}
	q.delays = q.delays[:last]
	es[idx].heapPos = none
	if pos != last {
		q.heapDown(pos)
		q.heapUp(pos)
	}
}

func (q *Queue[K]) heapSwap(i, j int) {
	h, es := q.delays, q.slab.entries
	h[i], h[j] = h[j], h[i]
	es[h[i].idx].heapPos = int32(i)
	es[h[j].idx].heapPos = int32(j)
}

func (q *Queue[K]) heapUp(i int) {
	h := q.delays
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(h[parent]) {
			return
		}
		q.heapSwap(i, parent)
		i = parent
	}
}

func (q *Queue[K]) heapDown(i int) {
	h := q.delays
	n := len(h)
	for {
		top, left, right := i, 2*i+1, 2*i+2
		if left < n && h[left].before(h[top]) {
			top = left
		}
		if right < n && h[right].before(h[top]) {
			top = right
		}
		if top == i {
			return
		}
		q.heapSwap(i, top)
		i = top
	}
}

// promoteDue moves every key due at or before now out of the heap and
// reports how many became ready. The caller holds q.mu and signals waiters.
func (q *Queue[K]) promoteDue(now int64) (readied int) {
	for len(q.delays) > 0 && q.delays[0].due <= now {
		idx := q.delays[0].idx
		q.heapRemove(idx)
		e := &q.slab.entries[idx]
		switch e.state {
		case stateWaiting:
			q.makeReady(idx, e.prio, now)
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
		readied := q.promoteDue(now)
		q.armed = never
		if len(q.delays) > 0 {
			q.armed = q.delays[0].due
		}
		armed := q.armed
		q.mu.Unlock()
		q.signal(readied)

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
			timer.Reset(d)
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

// closedTimeChan is always ready to receive from.
var closedTimeChan = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()
