// Package leasetest records the reconciles of replicas that take turns
// under a leader's lease, and checks that the terms never overlap: the
// tests of reconcile.Manager's graceful stop, on a memory lock under
// testing/synctest and on a real etcd lock, share it.
package leasetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/reconcile"
)

// Interval is one reconcile: who ran it, in which term, and when. Start and
// End are time.Now readings (monotonic: comparable within the process, and
// fake inside a synctest bubble); StartSeq and EndSeq order every start and
// end the Journal saw, so that two intervals that touch in time are still
// ordered by what happened first.
type Interval struct {
	Replica          string
	Term             leader.Term
	Start, End       time.Time
	StartSeq, EndSeq int
	// Cause is the reconcile context's cause if it was cancelled before
	// the reconcile was done, else nil.
	Cause error
}

// Journal records Intervals. Its methods are safe for concurrent use.
type Journal struct {
	mu      sync.Mutex
	seq     int
	done    []Interval
	running map[int]Interval // by StartSeq
	changed chan struct{}    // closed and replaced on every start and end
}

// New returns an empty Journal.
func New() *Journal {
	return &Journal{running: map[int]Interval{}, changed: make(chan struct{})}
}

// Holding returns a reconciler, for replica, that records an Interval for
// each reconcile and holds it for hold, or until its context is done.
func (j *Journal) Holding(replica string, hold time.Duration) reconcile.Reconciler[string] {
	return reconcile.Func(func(ctx context.Context, _ string) (reconcile.Result, error) {
		term, _ := leader.TermFromContext(ctx)
		seq := j.begin(replica, term)
		t := time.NewTimer(hold)
		defer t.Stop()
		var cause error
		select {
		case <-t.C:
		case <-ctx.Done():
			cause = context.Cause(ctx)
		}
		j.end(seq, cause)
		return reconcile.Result{}, nil
	})
}

func (j *Journal) begin(replica string, term leader.Term) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.running[j.seq] = Interval{Replica: replica, Term: term, Start: time.Now(), StartSeq: j.seq}
	j.notifyLocked()
	return j.seq
}

func (j *Journal) end(startSeq int, cause error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	iv := j.running[startSeq]
	delete(j.running, startSeq)
	j.seq++
	iv.End, iv.EndSeq, iv.Cause = time.Now(), j.seq, cause
	j.done = append(j.done, iv)
	j.notifyLocked()
}

func (j *Journal) notifyLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Done returns the finished intervals, in the order they ended.
func (j *Journal) Done() []Interval {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.done)
}

// Running returns the intervals not finished yet, in the order they
// started.
func (j *Journal) Running() []Interval {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Interval, 0, len(j.running))
	for _, iv := range j.running {
		out = append(out, iv)
	}
	slices.SortFunc(out, func(a, b Interval) int { return cmp.Compare(a.StartSeq, b.StartSeq) })
	return out
}

// Await waits until cond, called with the finished and the running
// intervals, holds, and reports whether it did before timeout (real time,
// or fake inside a synctest bubble).
func (j *Journal) Await(timeout time.Duration, cond func(done, running []Interval) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		changed := j.changed
		j.mu.Unlock()
		if cond(j.Done(), j.Running()) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// Overlaps returns a description of every pair of intervals of different
// terms that overlap, or whose order contradicts their terms': all of a
// term's reconciles must have ended before any of a later term's started.
// Running intervals count as not ended.
func Overlaps(done, running []Interval) []string {
	all := append(slices.Clone(done), running...)
	var problems []string
	for _, a := range all {
		for _, b := range all {
			if a.Term >= b.Term {
				continue
			}
			if a.EndSeq == 0 || a.EndSeq > b.StartSeq || a.End.After(b.Start) {
				problems = append(problems, fmt.Sprintf("%s reconciled in term %d from %v to %s while %s reconciled in term %d from %v",
					a.Replica, a.Term, a.Start.Format(time.StampMicro), endOf(a), b.Replica, b.Term, b.Start.Format(time.StampMicro)))
			}
		}
	}
	return problems
}

func endOf(iv Interval) string {
	if iv.EndSeq == 0 {
		return "(still running)"
	}
	return iv.End.Format(time.StampMicro)
}
