package workqueue

// state is where a key is in its life cycle. Every key in Queue.index has
// exactly one state; a free slab slot has stateFree.
type state uint8

const (
	// stateFree: the slot is on the free list and belongs to no key.
	stateFree state = iota
	// stateReady: the key is linked into exactly one ready list and waits
	// for Get. It is never in the delay heap.
	stateReady
	// stateWaiting: the key is in the delay heap only.
	stateWaiting
	// stateProcessing: a worker holds the key. It may also sit in the delay
	// heap (an AddAfter while processing); when that fires the key becomes
	// stateDirty.
	stateProcessing
	// stateDirty: a worker holds the key and it was added again; Done puts
	// it straight back into a ready list. It is never in the delay heap.
	stateDirty
)

const none int32 = -1

// link is an entry's place in a doubly linked list of entries.
type link struct{ prev, next int32 }

// unlinked is the link of an entry in no list.
var unlinked = [2]link{{none, none}, {none, none}}

// The lists an entry can be in at once, as indexes into entry.links.
const (
	readyLinks = 0
	ageLinks   = 1
)

// entry is one key's bookkeeping. Entries live in a slab (Queue.entries) and
// refer to each other by slab index, not by pointer, so that a million keys
// cost one allocation and nothing for the garbage collector to chase.
type entry[K comparable] struct {
	key K
	// links[readyLinks] links the entry into its ready list while
	// stateReady; its next alone links the free list, and while processing
	// with metrics on its prev is the entry's slot in Queue.inflight.
	// links[ageLinks] links it into the FIFO of all ready keys while
	// stateReady and ageing is on (ageing.go).
	links [2]link
	// waitSeq is the seq of the entry's live slot in Queue.delays, or 0
	// when the entry waits for no delay.
	waitSeq uint32
	// prio is the priority of the add that is ready or pending: the ready
	// list's priority while stateReady, the delayed add's while in the
	// delay heap, the re-add's while stateDirty.
	prio  int32
	state state
	// unstamped is set while the entry is ready without a time stamp of
	// its own: it ages from ageState.since.
	unstamped bool
}

// slab hands out entries by index and recycles freed ones, so steady-state
// traffic allocates nothing.
type slab[K comparable] struct {
	entries []entry[K]
	// dues is parallel to entries once any key has been delayed: the due
	// time of the entry's live slot in Queue.delays, while waitSeq != 0.
	dues []int64
	// times is parallel to entries and exists only when metrics or ageing
	// are on: the time (Queue.nanos) the key became ready, while
	// stateReady; with ageing but no metrics, only if it is not unstamped.
	times []int64
	// reasons is parallel to entries and exists only with WithReasons
	// (reasons.go): why the key was added since Get last handed it out.
	reasons []reasonSlot
	// free heads the free list threaded through the entries' ready links.
	free int32
	// used counts entries not on the free list.
	used int
	// reserve is how many more new entries Grow made room for: while it
	// is above 0, an emptied slab keeps its memory, since the keys
	// announced are still coming (a controller's workers
	// drain the queue faster than an informer hands over its list, and
	// would otherwise empty it, and drop the room, many times over).
	reserve int
}

func (s *slab[K]) alloc(key K) int32 {
	s.used++
	if s.reserve > 0 {
		s.reserve--
	}
	if s.free != none {
		idx := s.free
		e := &s.entries[idx]
		s.free = e.links[readyLinks].next
		*e = entry[K]{key: key, links: unlinked}
		if s.reasons != nil {
			s.reasons[idx].clear()
		}
		return idx
	}
	if s.reasons != nil {
		s.reasons = append(s.reasons, reasonSlot{})
	}
	s.entries = append(s.entries, entry[K]{key: key, links: unlinked})
	if s.times != nil {
		s.times = append(s.times, 0)
	}
	if s.dues != nil {
		s.dues = append(s.dues, 0)
	}
	return int32(len(s.entries) - 1)
}

// shrinkAbove is the slab size above which an emptied queue gives its memory
// back; below it, keeping the slab avoids allocating again on the next burst.
const shrinkAbove = 4096

// release frees idx. An emptied slab above shrinkAbove gives its memory
// back and reports dropped: every index into it is then invalid.
func (s *slab[K]) release(idx int32) (dropped bool) {
	s.used--
	if s.used == 0 && s.reserve == 0 && cap(s.entries) > shrinkAbove {
		s.entries, s.free, s.dues = nil, none, nil
		if s.times != nil {
			s.times = make([]int64, 0)
		}
		if s.reasons != nil {
			s.reasons = make([]reasonSlot, 0)
		}
		return true
	}
	e := &s.entries[idx]
	var zero K
	*e = entry[K]{key: zero, links: unlinked, state: stateFree} // drop the key so its memory can go
	e.links[readyLinks].next = s.free
	s.free = idx
	return false
}

// list is a FIFO of entries linked through entry.links[w], for one w.
type list struct {
	head, tail int32
	n          int
}

func newList() list { return list{head: none, tail: none} }

// pushBack links idx at the tail of l, through links[w].
func pushBack[K comparable](l *list, es []entry[K], idx int32, w int) {
	e := &es[idx].links[w]
	e.prev, e.next = l.tail, none
	if l.tail == none {
		l.head = idx
	} else {
		es[l.tail].links[w].next = idx
	}
	l.tail = idx
	l.n++
}

// unlink removes idx, which must be in l through links[w], in O(1).
func unlink[K comparable](l *list, es []entry[K], idx int32, w int) {
	e := &es[idx].links[w]
	if e.prev == none {
		l.head = e.next
	} else {
		es[e.prev].links[w].next = e.next
	}
	if e.next == none {
		l.tail = e.prev
	} else {
		es[e.next].links[w].prev = e.prev
	}
	e.prev, e.next = none, none
	l.n--
}

// popFront unlinks and returns the head of l, which must not be empty.
func popFront[K comparable](l *list, es []entry[K], w int) int32 {
	idx := l.head
	unlink(l, es, idx, w)
	return idx
}
