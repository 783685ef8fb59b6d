package workqueue

import "slices"

// maxGrowHint bounds what Grow reserves: a hint is an estimate (the size of
// an informer's cache), and a wrong one must not allocate without bound.
const maxGrowHint = 1 << 24

// Grow makes room in the slab for n more keys than the queue holds, so
// that adding them does not regrow it: a controller handing the queue a
// known-size initial list would otherwise copy it two dozen times (append
// grows large slices by a quarter), and leave the garbage collector the
// old copies. It is only a hint: n <= 0 does nothing, and adding more than
// n keys still works. Until n new keys have been added, a queue that
// empties keeps that room rather than giving its memory back (see
// slab.reserve).
//
// The index is left to follow the number of keys held: sized for the
// whole list while the workers keep the queue nearly empty, as they do
// while a list is handed over, it spread the few keys held over megabytes,
// and every Add and Done missed the cache.
// Grow does nothing after ShutDown.
func (q *Queue[K]) Grow(n int) {
	n = min(n, maxGrowHint)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.growLocked(n)
}

// GrowTo is Grow for a list of total keys that the queue has partly been
// handed already: it makes room for total keys in all, counting those it
// holds (all of them as the list's, which is exact while no worker has
// taken any), and reserves the rest.
func (q *Queue[K]) GrowTo(total int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.growLocked(min(total, maxGrowHint) - q.slab.used)
}

func (q *Queue[K]) growLocked(n int) {
	if n <= 0 || q.shuttingDown {
		return
	}
	q.slab.grow(q.slab.used + n)
	q.slab.reserve = max(q.slab.reserve, n)
}

// grow makes the slab's slices hold total entries without reallocating.
func (s *slab[K]) grow(total int) {
	if total <= cap(s.entries) {
		return
	}
	extra := total - len(s.entries)
	s.entries = slices.Grow(s.entries, extra)
	if s.times != nil {
		s.times = slices.Grow(s.times, extra)
	}
	if s.dues != nil {
		s.dues = slices.Grow(s.dues, extra)
	}
	if s.reasons != nil {
		s.reasons = slices.Grow(s.reasons, extra)
	}
}

// EndGrow cancels what is left of Grow's reservation: the keys it was
// made for have all been handed over, and those that did not come (a
// filter dropped them) must not keep the room for good. An emptied queue
// gives its memory back again from then on.
func (q *Queue[K]) EndGrow() {
	q.mu.Lock()
	q.slab.reserve = 0
	q.mu.Unlock()
}
