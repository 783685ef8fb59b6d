package simtest

import (
	"sync"
)

// runState is what one run shares among its processes: the write
// numbering, the schedule's crash points, the write log and the
// reconcile counts.
type runState struct {
	// crashed carries a process that crashed to the driver (buffered 1:
	// one process is alive at a time).
	crashed chan crash
	sched   Schedule
	gate    *gate

	mu         sync.Mutex
	faultAt    map[int]*Fault
	sources    []healer
	healthy    bool // set when the liveness phase begins
	budget     int  // writes, and reconciles, a run may make at most
	exhausted  bool // set when either went past budget
	writes     int
	log        []writeRecord
	reconciles map[string]int
	total      int // reconciles
	// busy counts the reconciles and writes under way: a system with one
	// under way (an Effect that takes virtual time) has not converged,
	// though it writes nothing for a while.
	busy int
	// ended has room for one signal: a reconcile or write ended, which
	// may have made an Await's condition hold.
	ended chan struct{}
}

// begin and end bracket a reconcile or a write, for busy.
func (r *runState) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy++
}

func (r *runState) end() {
	r.mu.Lock()
	r.busy--
	r.mu.Unlock()
	select {
	case r.ended <- struct{}{}:
	default:
	}
}

func (r *runState) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.busy == 0
}

// wrote numbers a write that has just been made, w, and returns the
// fault the schedule puts after it, if any.
func (r *runState) wrote(w writeRecord) (n int, fault *Fault, over bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	n = r.writes
	if n > r.budget {
		r.exhausted = true
		return n, nil, true
	}
	fault = r.faultAt[n]
	w.n, w.fault, w.sequence = n, fault, r.sequence(w.by)
	r.log = append(r.log, w)
	return n, fault, false
}

// sequence is the number the next write of reconciles of by gets. r.mu
// must be held.
func (r *runState) sequence(by string) int {
	seq := 1
	for _, w := range r.log {
		if by != "" && w.by == by {
			seq++
		}
	}
	return seq
}

// deposeNext says whether the schedule freezes the process before this
// write, w, the next one; if so the write is numbered and logged now, the
// fault is used up, and the returned function records the write's outcome
// once it is made.
func (r *runState) deposeNext(w writeRecord) (outcome func(error), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.faultAt[r.writes+1]
	if f == nil || f.Kind != Depose {
		return nil, false
	}
	r.writes++
	delete(r.faultAt, r.writes)
	w.n, w.fault, w.sequence = r.writes, f, r.sequence(w.by)
	i := len(r.log)
	r.log = append(r.log, w)
	return func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.log[i].err = err
	}, true
}

// healer is a source whose faults Heal turns off (*faults.Source); it
// starts with them on.
type healer interface{ Heal() }

// addSource registers a faulty source, healthy already if the run is in
// its liveness phase.
func (r *runState) addSource(s healer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.healthy {
		s.Heal()
	}
	r.sources = append(r.sources, s)
}

// heal turns the source faults off, for the liveness phase: as with
// informer/faults in any test, the system must converge once they stop.
func (r *runState) heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.healthy = true
	for _, s := range r.sources {
		s.Heal()
	}
}

// reconciled counts a reconcile of who, and reports whether the run has
// gone past its budget.
func (r *runState) reconciled(who string) (over bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconciles[who]++
	r.total++
	if r.total > r.budget {
		r.exhausted = true
	}
	return r.exhausted
}

func (r *runState) overBudget() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exhausted
}

// writesSince returns the logged writes numbered after n.
func (r *runState) writesSince(n int) []writeRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []writeRecord
	for _, w := range r.log {
		if w.n > n {
			out = append(out, w)
		}
	}
	return out
}

func (r *runState) writeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func (r *runState) reconcileCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.reconciles))
	for k, v := range r.reconciles {
		m[k] = v
	}
	return m
}
