package reconcile

import (
	"time"

	"github.com/converge-go/converge/internal/workqueue"
)

// maxMissed bounds the keys a missed remembers in each of its two
// generations: past it, further misses are not remembered, and those
// keys are queued with the bulk of their bucket when it is acquired.
const maxMissed = 1 << 16

// missed remembers the keys whose fresh changes a sharded controller
// dropped because their bucket was not held here (and the keys taken from
// the queue after their bucket had moved away), so that when the bucket
// is acquired they are queued at normal priority, before the bulk of its
// keys, which go in at low priority. Those are the changes that may have
// arrived while the bucket had no owner, or while its owner was losing
// it; without this, each move would put them back behind every key of the
// moved buckets.
//
// It remembers a key for at least keep/2 and less than keep after its
// last miss, in two generations of keep/2 each, so it costs nothing per
// key to expire; keep is twice the time a bucket can stay without an
// owner (shard.Sharder.MoveWithin), so a change missed during one move is
// still remembered at the next. Not safe for concurrent use: the
// sharding's mu guards it.
type missed[K comparable] struct {
	keep time.Duration
	// cur holds the keys missed since curStart, less than keep/2 ago;
	// prev those missed in the keep/2 from prevStart.
	cur, prev           map[int]map[K]struct{}
	curStart, prevStart time.Time
	n                   int // keys in cur
}

// add remembers key of bucket b, missed at now.
func (m *missed[K]) add(b int, key K, now time.Time) {
	m.rotate(now)
	if m.n >= maxMissed {
		return
	}
	if m.cur == nil {
		m.cur = make(map[int]map[K]struct{})
	}
	keys := m.cur[b]
	if keys == nil {
		keys = make(map[K]struct{})
		m.cur[b] = keys
	}
	if _, ok := keys[key]; !ok {
		keys[key] = struct{}{}
		m.n++
	}
}

// rotate starts a new generation once the current one is keep/2 old.
func (m *missed[K]) rotate(now time.Time) {
	if now.Before(m.curStart.Add(m.keep / 2)) {
		return
	}
	m.prev, m.prevStart = m.cur, m.curStart
	m.cur, m.curStart, m.n = nil, now, 0
}

// take returns, and forgets, the keys of bucket b missed within keep of now.
func (m *missed[K]) take(b int, now time.Time) []K {
	m.rotate(now)
	var out []K
	for k := range m.cur[b] {
		out = append(out, k)
	}
	if now.Before(m.prevStart.Add(m.keep)) { // its oldest key is less than keep old
		for k := range m.prev[b] {
			out = append(out, k)
		}
	}
	if keys := m.cur[b]; keys != nil {
		m.n -= len(keys)
		delete(m.cur, b)
	}
	delete(m.prev, b)
	return out
}

// requeueMissed queues, at normal priority, the keys of bucket that were
// missed while it was not held here, and returns them, for the bulk to
// skip: a key queued twice while a worker has it would run twice.
func (c *Controller[K]) requeueMissed(r *run[K], bucket int) map[K]struct{} {
	sh := c.shards
	sh.mu.Lock()
	keys := sh.missed.take(bucket, c.s.clock.Now())
	sh.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	queued := make(map[K]struct{}, len(keys))
	ev := enqueueEvent{prio: workqueue.PriorityNormal}
	for _, k := range keys {
		if _, dup := queued[k]; !dup {
			queued[k] = struct{}{}
			r.enqueue(ev, k)
		}
	}
	return queued
}
