package workqueue

import (
	"cmp"
	"slices"
	"time"
)

// The read side for debug pages: Stats, Inspect and Peek take the lock the
// hot path takes, but only for bounded work (O(priorities × groups), one
// index lookup, at most MaxPeek keys), so a page that refreshes never holds
// up Get or Done for long, and nothing here adds work to Add, Get or Done.

// Stats is a snapshot of a queue's state: see Queue.Stats.
type Stats struct {
	// Ready counts the ready keys by priority.
	Ready map[int]int
	// ReadyByGroup counts the ready keys by fairness group (WithGroup),
	// over all priorities; nil without groups.
	ReadyByGroup map[string]int
	// Len is the number of ready keys, the sum of Ready.
	Len int
	// Waiting counts the keys waiting for a delay (AddAfter, a backoff),
	// parked ones included.
	Waiting int
	// Processing counts the keys handed out by Get and not yet Done.
	Processing int
	// OldestReady is how long the oldest ready key has waited, if
	// OldestKnown. It is exact with ageing on; without it, it is the oldest
	// of the heads of the ready lists, which a key raised to a higher
	// priority can hide.
	OldestReady time.Duration
	// OldestKnown says that OldestReady was measured: some key is ready
	// and its ready time was noted (WithMetrics, WithReadyTimes, or ageing
	// while keys of several priorities are ready).
	OldestKnown bool
	// ShuttingDown is true after ShutDown.
	ShuttingDown bool
}

// Stats returns a snapshot of the queue's depth by priority and group, its
// waiting and processing keys and the oldest ready key's wait. It costs
// O(priorities × groups) under the queue's lock, whatever the number of
// keys.
func (q *Queue[K]) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{
		Ready:        make(map[int]int, len(q.ready.active)),
		Len:          q.ready.n,
		Waiting:      q.slab.used - q.ready.n - q.processing,
		Processing:   q.processing,
		ShuttingDown: q.shuttingDown,
	}
	if q.ready.grouped {
		s.ReadyByGroup = make(map[string]int)
	}
	oldest := int64(never)
	for _, l := range q.ready.active {
		s.Ready[int(l.prio)] = l.n
		for g := l.first; g != nil; g = g.next {
			if s.ReadyByGroup != nil {
				s.ReadyByGroup[g.name] += g.items.n
			}
			if q.age.bound == 0 {
				if t, ok := q.readyTime(g.items.head); ok {
					oldest = min(oldest, t)
				}
			}
		}
	}
	if q.age.bound != 0 && q.age.fifo.head != none {
		if t, ok := q.readyTime(q.age.fifo.head); ok {
			oldest = t
		}
	}
	if oldest != never {
		s.OldestReady, s.OldestKnown = time.Duration(max(q.nanos()-oldest, 0)), true
	}
	return s
}

// readyTime returns when the ready key idx became ready, if that was noted.
// The caller holds q.mu.
func (q *Queue[K]) readyTime(idx int32) (int64, bool) {
	if q.slab.times == nil {
		return 0, false
	}
	if q.slab.entries[idx].unstamped && !q.stamp {
		// Ageing left it unstamped: it ages from since, once that is set.
		return q.age.since, q.age.sinceSet
	}
	return q.slab.times[idx], true
}

// Phase is where a key is in the queue: see Queue.Inspect.
type Phase uint8

const (
	// Absent: the queue does not hold the key.
	Absent Phase = iota
	// Ready: the key waits for Get.
	Ready
	// Waiting: the key waits for a delay (AddAfter, a backoff), or is
	// parked.
	Waiting
	// Processing: a worker holds the key.
	Processing
	// Dirty: a worker holds the key and it was added again: it is ready
	// again once Done.
	Dirty
)

var phaseNames = [...]string{"absent", "ready", "waiting", "processing", "dirty"}

// String returns the phase in lower case: "ready", "waiting".
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// KeyInfo is what the queue knows about one key: see Queue.Inspect.
type KeyInfo struct {
	// Phase is where the key is.
	Phase Phase
	// Priority is the priority of its ready or pending add.
	Priority int
	// Due is when a waiting key (or a processing key re-added with a
	// delay) becomes ready; zero if it waits for no delay.
	Due time.Time
	// Parked is true if it waits with no due time (a delay beyond the
	// clock's range): only an add makes it ready.
	Parked bool
	// ReadySince is when a ready key became ready, if that was noted
	// (see Stats.OldestKnown); zero otherwise.
	ReadySince time.Time
	// Reasons are why the key was added since Get last handed it out
	// (WithReasons; empty without).
	Reasons Reasons
}

// Inspect returns what the queue knows about key, and false if it does not
// hold it. It costs one index lookup under the queue's lock.
func (q *Queue[K]) Inspect(key K) (KeyInfo, bool) {
	if !usable(q.checkKeys, key) {
		return KeyInfo{}, false
	}
	tag := q.tag(key)
	q.mu.Lock()
	defer q.mu.Unlock()
	idx, _ := q.index.find(q.slab.entries, key, tag)
	if idx == none {
		return KeyInfo{}, false
	}
	e := &q.slab.entries[idx]
	info := KeyInfo{Priority: int(e.prio)}
	switch e.state {
	case stateReady:
		info.Phase = Ready
		if t, ok := q.readyTime(idx); ok {
			info.ReadySince = q.epoch.Add(time.Duration(t))
		}
	case stateWaiting:
		info.Phase = Waiting
	case stateProcessing:
		info.Phase = Processing
	case stateDirty:
		info.Phase = Dirty
	}
	if q.slab.reasons != nil {
		q.copyReasons(&q.slab.reasons[idx], &info.Reasons)
	}
	if e.waitSeq != 0 {
		if due := q.slab.dues[idx]; due == never {
			info.Parked = true
		} else {
			info.Due = q.epoch.Add(time.Duration(due))
		}
	}
	return info, true
}

// MaxPeek bounds Peek's answer.
const MaxPeek = 1000

// Peek returns up to n ready keys (at most MaxPeek) in the order Get would
// hand them out if nothing were added meanwhile and no key had aged: by
// priority, round-robin across groups, FIFO within a group. It costs O(n +
// priorities × groups) under the queue's lock.
func (q *Queue[K]) Peek(n int) []K {
	n = min(n, MaxPeek)
	if n <= 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	es := q.slab.entries
	levels := slices.Clone(q.ready.active)
	slices.SortFunc(levels, func(a, b *level) int { return cmp.Compare(b.prio, a.prio) })
	out := make([]K, 0, min(n, q.ready.n))
	var heads []int32
	for _, l := range levels {
		// One cursor per group, in ring order; each round takes one key
		// from every group that has one left.
		heads = heads[:0]
		for g := l.first; g != nil; g = g.next {
			heads = append(heads, g.items.head)
		}
		for left := len(heads); left > 0 && len(out) < n; {
			for i, idx := range heads {
				if idx == none {
					continue
				}
				out = append(out, es[idx].key)
				heads[i] = es[idx].links[readyLinks].next
				if heads[i] == none {
					left--
				}
				if len(out) == n {
					return out
				}
			}
		}
	}
	return out
}
