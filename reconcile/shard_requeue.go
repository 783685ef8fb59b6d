package reconcile

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/workqueue"
)

// requeue is a sharded controller's queueing of the keys of a bucket it
// acquired: the cost of taking a bucket is that bucket's keys, not the
// whole cache.
//
// An informer watched with For is given an index of its keys by bucket
// (added once, on the first acquisition), so a bucket's keys are listed
// from it and only they go through the predicates. An informer watched
// with Watch maps its entries to keys of any bucket, so it is scanned
// whole, but once for every bucket acquired meanwhile: the acquisitions
// that arrive while a scan runs wait for the next one, which serves them
// all.
type requeue[K comparable] struct {
	mu sync.Mutex
	// index names each For informer's bucket index; "" if AddIndex
	// failed (then that informer is scanned too). Guarded by mu.
	index map[any]string
	// pending are the buckets acquired since the last scan began, each
	// with the keys to skip (queued already), and scanning is true while
	// a scan runs. Guarded by mu.
	pending  map[int]map[K]struct{}
	scanning bool
}

// bucketIndexSeq makes every bucket index's name unique: two controllers
// may shard one informer with different key functions or bucket counts.
var bucketIndexSeq atomic.Uint64

// bucketWatch is a watch whose cached keys a bucket's acquisition queues:
// an informerWatch.
type bucketWatch[K comparable] interface {
	// requeueIndexed queues bucket's keys but those in skip from the
	// informer's bucket index, and reports false if the watch cannot have
	// one (its keys are mapped: it needs a scan).
	requeueIndexed(r *run[K], sh *sharding[K], bucket int, skip map[K]struct{}) bool
	// requeueScan queues the keys the watch maps its entries to whose
	// bucket is in buckets, but those in that bucket's skip set.
	requeueScan(r *run[K], sh *sharding[K], buckets map[int]map[K]struct{})
}

// requeueBucket queues, on the current run, the keys of bucket whose
// changes were missed while it was not held here at normal priority, then
// every key of bucket that the watched informers hold or that sources
// delivered, at low priority, as an initial list would.
func (c *Controller[K]) requeueBucket(bucket int) {
	r := c.current()
	if r == nil {
		return // the next run's initial lists queue them
	}
	sh := c.shards
	skip := c.requeueMissed(r, bucket) // first: before the bulk, and at a higher priority
	var scan []bucketWatch[K]
	for _, w := range c.watches {
		if bw, ok := w.(bucketWatch[K]); ok && !bw.requeueIndexed(r, sh, bucket, skip) {
			scan = append(scan, bw)
		}
	}
	ev := enqueueEvent{prio: workqueue.PriorityLow}
	for _, k := range sh.sourcedIn(bucket) {
		if _, queued := skip[k]; !queued {
			r.enqueue(ev, k)
		}
	}
	if len(scan) > 0 {
		sh.scan(r, scan, bucket, skip)
	}
}

// scan queues bucket's keys from the watches that must be scanned, in one
// scan with every other bucket acquired meanwhile (see requeue).
func (sh *sharding[K]) scan(r *run[K], watches []bucketWatch[K], bucket int, skip map[K]struct{}) {
	q := &sh.requeue
	q.mu.Lock()
	if q.pending == nil {
		q.pending = make(map[int]map[K]struct{})
	}
	q.pending[bucket] = skip
	if q.scanning {
		q.mu.Unlock()
		return // the scan running now goes round again for it
	}
	q.scanning = true
	for len(q.pending) > 0 {
		buckets := q.pending
		q.pending = make(map[int]map[K]struct{})
		q.mu.Unlock()
		for _, w := range watches {
			w.requeueScan(r, sh, buckets)
		}
		q.mu.Lock()
	}
	q.scanning = false
	q.mu.Unlock()
}

// bucketIndex returns the name of w's bucket index, adding it on first
// use; "" if it could not be added.
func (w *informerWatch[K, WK, WV]) bucketIndex(sh *sharding[K]) string {
	q := &sh.requeue
	q.mu.Lock()
	defer q.mu.Unlock()
	if name, ok := q.index[w]; ok {
		return name
	}
	if q.index == nil {
		q.index = make(map[any]string)
	}
	name := fmt.Sprintf("reconcile.WithShards/%s/%d", sh.c.name, bucketIndexSeq.Add(1))
	values := make([]string, sh.buckets)
	for b := range values {
		values[b] = strconv.Itoa(b)
	}
	// The informer calls an IndexFunc under its write lock, one call at
	// a time, and keeps no result: one slice serves every call.
	var one [1]string
	err := w.inf.AddIndex(name, func(k WK, _ WV) (vals []string) {
		// A panic of keyOf must not make the informer skip the change for
		// its other users: the key is left out of the index instead (its
		// enqueue recovers the same panic, and drops it, anyway).
		defer func() {
			if recover() != nil {
				vals = nil
			}
		}()
		one[0] = values[sh.bucketOf(w.same(k))]
		return one[:]
	})
	if err != nil {
		sh.c.s.logger.Warn("a sharded controller could not index its informer by bucket; it scans it instead",
			"controller", sh.c.name, "informer", w.inf.Name(), "error", err)
		name = ""
	}
	q.index[w] = name
	return name
}

func (w *informerWatch[K, WK, WV]) requeueIndexed(r *run[K], sh *sharding[K], bucket int, skip map[K]struct{}) bool {
	if w.same == nil {
		return false
	}
	name := w.bucketIndex(sh)
	if name == "" {
		return false
	}
	keep := func(k K) bool {
		_, queued := skip[k]
		return !queued
	}
	for _, e := range w.inf.ByIndex(name, strconv.Itoa(bucket)) {
		if keep(w.same(e.Key)) {
			w.requeueEntry(r, e, keep)
		}
	}
	return true
}

func (w *informerWatch[K, WK, WV]) requeueScan(r *run[K], sh *sharding[K], buckets map[int]map[K]struct{}) {
	keep := func(k K) bool {
		skip, ok := buckets[sh.bucketOf(k)]
		if _, queued := skip[k]; queued {
			return false
		}
		return ok
	}
	for _, e := range w.inf.List() {
		if w.same != nil && !keep(w.same(e.Key)) {
			continue // its bucket is known before the predicates run
		}
		w.requeueEntry(r, e, keep)
	}
}

// requeueEntry queues, at low priority, the keys that w maps e to and
// that keep accepts, as if e were listed afresh: through the predicates,
// as an initial-list addition.
func (w *informerWatch[K, WK, WV]) requeueEntry(r *run[K], e informer.Entry[WK, WV], keep func(K) bool) {
	defer recoverWatch(r, w, e.Key)
	ch := Change[WK, WV]{Kind: Added, Key: e.Key, New: e.Value, InitialList: true}
	for _, p := range w.preds {
		if !p(ch) {
			return
		}
	}
	ev := enqueueEvent{prio: workqueue.PriorityLow}
	if w.same != nil {
		if k := w.same(e.Key); keep(k) {
			r.enqueue(ev, k)
		}
		return
	}
	for _, k := range w.toKeys(e.Key, e.Value) {
		if keep(k) {
			r.enqueue(ev, k)
		}
	}
}
