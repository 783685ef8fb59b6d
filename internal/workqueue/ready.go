package workqueue

// The ready side of the queue: keys that Get may hand out now.
//
// Ready keys are kept per priority level; within a level, per group; within a
// group, in FIFO order. Get serves the highest non-empty level, and within it
// the group at the front of the level's round-robin ring, which then moves to
// the back. Without a group function every level has one group, and the ring
// never turns.

// group is one fairness group's FIFO of ready keys within a level.
type group struct {
	name  string
	items list
	// prev and next link the group into its level's ring of non-empty
	// groups; a group is in the ring exactly when items.n > 0.
	prev, next *group
}

// level holds the ready keys of one priority.
type level struct {
	prio int32
	// n counts the ready keys in all of the level's groups.
	n int
	// heapPos is the level's index in readySet.active while n > 0, else
	// none.
	heapPos int
	// first and last bound the ring of non-empty groups, in serving order.
	first, last *group
	// groups finds a group by name; nil without a group function, when
	// every key goes to single.
	groups map[string]*group
	single group
}

// maxIdleLevels is how many empty levels are kept for reuse. Programs use a
// handful of priorities; a program that uses thousands should not pay for
// them forever.
const maxIdleLevels = 8

// readySet is the set of ready keys across all priorities.
type readySet struct {
	// n counts ready keys in all levels; it is the queue's Len.
	n int
	// levels finds a level by priority, empty or not.
	levels map[int32]*level
	// last is the level of the most recent add, to skip the map lookup when
	// priorities repeat (they nearly always do).
	last *level
	// active is a max-heap by prio of the levels with n > 0.
	active []*level
	// grouped is true when a group function was given.
	grouped bool
}

func newReadySet(grouped bool) readySet {
	return readySet{levels: make(map[int32]*level), grouped: grouped}
}

func (r *readySet) level(prio int32) *level {
	if l := r.last; l != nil && l.prio == prio {
		return l
	}
	l := r.levels[prio]
	if l == nil {
		l = &level{prio: prio, heapPos: -1}
		l.single.items = newList()
		if r.grouped {
			l.groups = make(map[string]*group)
		}
		r.levels[prio] = l
	}
	r.last = l
	return l
}

// groupFor returns the level's group called name, creating it if needed.
func (l *level) groupFor(name string) *group {
	if l.groups == nil {
		return &l.single
	}
	g := l.groups[name]
	if g == nil {
		g = &group{name: name, items: newList()}
		l.groups[name] = g
	}
	return g
}

// push links idx at the back of its group in the level of prio.
func push[K comparable](r *readySet, es []entry[K], idx int32, prio int32, groupName string) {
	l := r.level(prio)
	g := l.groupFor(groupName)
	pushBack(&g.items, es, idx, readyLinks)
	if g.items.n == 1 {
		l.ringAppend(g)
	}
	l.n++
	r.n++
	if l.n == 1 {
		r.heapPush(l)
	}
	es[idx].prio = prio
	es[idx].state = stateReady
}

// pop unlinks and returns the next key to serve; the set must not be empty.
func pop[K comparable](r *readySet, es []entry[K]) int32 {
	l := r.active[0]
	g := l.first
	idx := popFront(&g.items, es, readyLinks)
	if g.items.n == 0 {
		l.ringRemove(g)
		l.dropGroup(g)
	} else if l.first != l.last {
		l.ringRemove(g)
		l.ringAppend(g)
	}
	r.taken(l)
	return idx
}

// peek returns the key pop would return; the set must not be empty.
func peek(r *readySet) int32 { return r.active[0].first.items.head }

// remove unlinks the ready key idx from the middle of its group, in O(1).
func remove[K comparable](r *readySet, es []entry[K], idx int32, groupName string) {
	l := r.level(es[idx].prio)
	g := l.groupFor(groupName)
	unlink(&g.items, es, idx, readyLinks)
	if g.items.n == 0 {
		l.ringRemove(g)
		l.dropGroup(g)
	}
	r.taken(l)
}

// taken accounts for one key leaving l.
func (r *readySet) taken(l *level) {
	l.n--
	r.n--
	if l.n > 0 {
		return
	}
	r.heapRemove(l)
	if len(r.levels) > maxIdleLevels {
		delete(r.levels, l.prio)
		if r.last == l {
			r.last = nil
		}
	}
}

// dropGroup forgets an empty group so that a program with unbounded group
// names (tenants come and go) does not keep them all.
func (l *level) dropGroup(g *group) {
	if l.groups != nil {
		delete(l.groups, g.name)
	}
}

func (l *level) ringAppend(g *group) {
	g.prev, g.next = l.last, nil
	if l.last == nil {
		l.first = g
	} else {
		l.last.next = g
	}
	l.last = g
}

func (l *level) ringRemove(g *group) {
	if g.prev == nil {
		l.first = g.next
	} else {
		g.prev.next = g.next
	}
	if g.next == nil {
		l.last = g.prev
	} else {
		g.next.prev = g.prev
	}
	g.prev, g.next = nil, nil
}

// The active heap is small (one entry per priority in use), so a plain binary
// heap with the position kept on the level is enough.

func (r *readySet) heapPush(l *level) {
	l.heapPos = len(r.active)
	r.active = append(r.active, l)
	r.heapUp(l.heapPos)
}

func (r *readySet) heapRemove(l *level) {
	i, last := l.heapPos, len(r.active)-1
	if i != last {
		r.heapSwap(i, last)
	}
	r.active[last] = nil
	r.active = r.active[:last]
	l.heapPos = -1
	if i != last {
		r.heapDown(i)
		r.heapUp(i)
	}
}

func (r *readySet) heapSwap(i, j int) {
	r.active[i], r.active[j] = r.active[j], r.active[i]
	r.active[i].heapPos, r.active[j].heapPos = i, j
}

func (r *readySet) heapUp(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if r.active[parent].prio >= r.active[i].prio {
			return
		}
		r.heapSwap(i, parent)
		i = parent
	}
}

func (r *readySet) heapDown(i int) {
	n := len(r.active)
	for {
		top, left, right := i, 2*i+1, 2*i+2
		if left < n && r.active[left].prio > r.active[top].prio {
			top = left
		}
		if right < n && r.active[right].prio > r.active[top].prio {
			top = right
		}
		if top == i {
			return
		}
		r.heapSwap(i, top)
		i = top
	}
}
