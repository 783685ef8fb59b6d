package reconcile

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/converge-go/converge/queue"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// Introspection: what the debug pages read (inspect, inspectKey). Every worker
// owns a slot with the reconcile it runs and a ring of its last reconciles;
// it alone writes it, under a mutex that only a reader also takes, so the
// workers share no cache line and a reader never walks the keys: a page
// reads the slots (workers × ring), the queue's counters and the failing
// keys, whatever the number of keys queued.

// ringSize is how many past reconciles each worker remembers.
const ringSize = 64

// workerSlot is one worker's current reconcile and its recent ones.
type workerSlot[K comparable] struct {
	mu sync.Mutex
	// Guarded by mu:
	busy  bool
	key   K
	id    uint64
	start time.Time
	why   *triggerSet // shared with the reconcile's context, read-only
	ring  [ringSize]past[K]
	next  int // ring index of the next record
	n     int // records in ring, up to ringSize
	_     [64]byte
}

// past is one finished reconcile.
type past[K comparable] struct {
	key    K
	id     uint64
	start  time.Time
	dur    time.Duration
	result string
	err    error // formatted only when read
	why    *triggerSet
}

// begin notes the reconcile the worker starts.
func (s *workerSlot[K]) begin(key K, id uint64, start time.Time, why *triggerSet) {
	s.mu.Lock()
	s.busy, s.key, s.id, s.start, s.why = true, key, id, start, why
	s.mu.Unlock()
}

// end records the reconcile begun last as finished.
func (s *workerSlot[K]) end(dur time.Duration, result string, err error) {
	s.mu.Lock()
	s.ring[s.next] = past[K]{key: s.key, id: s.id, start: s.start, dur: dur, result: result, err: err, why: s.why}
	s.next = (s.next + 1) % ringSize
	s.n = min(s.n+1, ringSize)
	s.busy = false
	var zero K
	s.key, s.why = zero, nil // let their memory go
	s.mu.Unlock()
}

// inspect returns a snapshot of the controller for the debug pages. Its
// cost is bounded whatever the number of keys queued: the queue's
// counters and debugpage.ReadyShown keys from its head, the workers'
// slots, and one pass over the failing keys (which the controller holds
// anyway) keeping the debugpage.FailingShown with the most attempts.
//
// Times (a reconcile's start, age and duration, the oldest ready key's
// wait) are noted only when something needs them, so that a controller
// without metrics or pages reads no clock per reconcile: with WithMetrics,
// or under a Manager whose Debug.Enabled is set (from the next Run on).
// Otherwise they are zero, and in-flight reconciles are in start order
// by reconcile ID.
func (c *Controller[K]) inspect() debugpage.ControllerInfo {
	info := debugpage.ControllerInfo{Name: c.name, Workers: c.s.workers, Reconciles: c.ids.Load()}
	if r := c.current(); r != nil {
		info.Running = true
		info.Queue = queue.Stats(r.q.Stats())
		for _, k := range r.q.Peek(debugpage.ReadyShown) {
			info.Ready = append(info.Ready, fmt.Sprint(k))
		}
		now := c.s.clock.Now()
		for i := range r.slots {
			s := &r.slots[i]
			s.mu.Lock()
			if s.busy {
				f := debugpage.InFlight{Key: fmt.Sprint(s.key), ReconcileID: strconv.FormatUint(s.id, 10), Started: s.start, Triggers: pageTriggers(c.triggers(s.why))}
				if !s.start.IsZero() {
					f.Age = now.Sub(s.start)
				}
				info.InFlight = append(info.InFlight, f)
			}
			s.mu.Unlock()
		}
		info.Busy = len(info.InFlight)
		slices.SortFunc(info.InFlight, func(a, b debugpage.InFlight) int {
			return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(len(a.ReconcileID), len(b.ReconcileID)), cmp.Compare(a.ReconcileID, b.ReconcileID))
		})
		info.WaitingForWrites = int(c.gate.n.Load())
	}
	info.Failing, info.Parked, info.FailingTotal, info.ParkedTotal = c.keys.top(debugpage.FailingShown)
	return info
}

// current returns the Run in progress, or nil.
func (c *Controller[K]) current() *run[K] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// scanChunk is how many failing keys top and find visit per hold of
// keyStates.mu. Every reconcile that ends takes that lock while any key
// fails, so a page's pass over many failing keys (an outage: all of them)
// lets the workers in between chunks rather than stall them for the whole
// pass (BenchmarkDebugLockHolds: 100k failing keys held the lock for
// milliseconds in one piece).
const scanChunk = 256

// scanFailing calls visit for each failing key and its status, holding
// ks.mu for scanChunk keys at a time, and pause between chunks, without
// it (runtime.Gosched: a worker waiting for the lock takes it then); visit
// returns false to stop. Between chunks the workers may add and remove
// keys: a key added during the pass may be missed and one removed may have
// been visited, as with a map changed while it is ranged over; a key is
// never visited twice unless it was removed and added back during the
// pass.
func (ks *keyStates[K]) scanFailing(pause func(), visit func(K, *KeyStatus) bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	i := 0
	for k, st := range ks.m {
		if !visit(k, st) {
			return
		}
		if i++; i%scanChunk == 0 {
			ks.mu.Unlock()
			pause()
			ks.mu.Lock()
		}
	}
}

// top returns up to n failing keys with the most attempts (most first,
// then by key), up to n parked keys, and the totals. It copies n lines at
// most, in one pass over the failing keys that holds their lock
// scanChunk keys at a time, and formats them after.
func (ks *keyStates[K]) top(n int) (failing, parked []debugpage.KeyLine, nFailing, nParked int) {
	type cand struct {
		key K
		st  KeyStatus
	}
	var best, parks []cand
	less := func(a, b cand) int { // most attempts first
		return cmp.Compare(b.st.Attempts, a.st.Attempts)
	}
	has := func(cs []cand, k K) bool {
		return slices.ContainsFunc(cs, func(c cand) bool { return c.key == k })
	}
	ks.scanFailing(runtime.Gosched, func(k K, st *KeyStatus) bool {
		if st.Parked && len(parks) < n && !has(parks, k) {
			parks = append(parks, cand{k, *st})
		}
		switch {
		case len(best) < n:
			if !has(best, k) {
				best = append(best, cand{k, *st})
				if len(best) == n {
					slices.SortFunc(best, less)
				}
			}
		case st.Attempts > best[n-1].st.Attempts && !has(best, k):
			// Insert in order, dropping the last: n is small.
			i, _ := slices.BinarySearchFunc(best, cand{st: *st}, less)
			copy(best[i+1:], best[i:n-1])
			best[i] = cand{k, *st}
		}
		return true
	})
	nFailing, nParked = int(ks.size.Load()), int(ks.nParked.Load())
	line := func(c cand) debugpage.KeyLine {
		l := debugpage.KeyLine{Key: fmt.Sprint(c.key), Attempts: c.st.Attempts, NextRetry: c.st.NextRetry, Parked: c.st.Parked, Terminal: c.st.Terminal}
		l.LastError, l.LastErrorLen = debugpage.ErrorText(c.st.LastError)
		return l
	}
	for _, c := range best {
		failing = append(failing, line(c))
	}
	slices.SortStableFunc(failing, func(a, b debugpage.KeyLine) int {
		return cmp.Or(cmp.Compare(b.Attempts, a.Attempts), cmp.Compare(a.Key, b.Key))
	})
	for _, c := range parks {
		parked = append(parked, line(c))
	}
	slices.SortFunc(parked, func(a, b debugpage.KeyLine) int { return cmp.Compare(a.Key, b.Key) })
	return failing, parked, nFailing, nParked
}
