package reconcile

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/queue"
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
type requeue struct {
	mu sync.Mutex
	// index names each For informer's bucket index; "" if AddIndex
	// failed (then that informer is scanned too). Guarded by mu.
	index map[any]string
	// pending are the buckets acquired since the last scan began, and
	// scanning is true while a scan runs. Guarded by mu.
	pending  map[int]struct{}
	scanning bool
}

// bucketIndexSeq makes every bucket index's name unique: two controllers
// may shard one informer with different key functions or bucket counts.
var bucketIndexSeq atomic.Uint64

// bucketWatch is a watch whose cached keys a bucket's acquisition queues:
// an informerWatch.
type bucketWatch[K comparable] interface {
	// requeueIndexed queues bucket's keys from the informer's bucket
	// index, and reports false if the watch cannot have one (its keys are
	// mapped: it needs a scan).
	requeueIndexed(r *run[K], sh *sharding[K], bucket int) bool
	// requeueScan queues the keys the watch maps its entries to whose
	// bucket is one of buckets.
	requeueScan(r *run[K], sh *sharding[K], buckets map[int]struct{})
}

// requeueBucket queues, on the current run, every key of bucket that the
// watched informers hold or that sources delivered, at low priority, as
// an initial list would.
func (c *Controller[K]) requeueBucket(bucket int) {
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r == nil {
		return // the next run's initial lists queue them
	}
	sh := c.shards
	var scan []bucketWatch[K]
	for _, w := range c.watches {
		if bw, ok := w.(bucketWatch[K]); ok && !bw.requeueIndexed(r, sh, bucket) {
			scan = append(scan, bw)
		}
	}
	ev := enqueueEvent{prio: queue.PriorityLow}
	for _, k := range sh.sourcedIn(bucket) {
		r.enqueue(ev, k)
	}
	if len(scan) > 0 {
		sh.scan(r, scan, bucket)
	}
}

// scan queues bucket's keys from the watches that must be scanned, in one
// scan with every other bucket acquired meanwhile (see requeue).
func (sh *sharding[K]) scan(r *run[K], watches []bucketWatch[K], bucket int) {
	q := &sh.requeue
	q.mu.Lock()
	if q.pending == nil {
		q.pending = make(map[int]struct{})
	}
	q.pending[bucket] = struct{}{}
	if q.scanning {
		q.mu.Unlock()
		return // the scan running now goes round again for it
	}
	q.scanning = true
	for len(q.pending) > 0 {
		buckets := q.pending
		q.pending = make(map[int]struct{})
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
	err := w.inf.AddIndex(name, func(k WK, _ WV) []string {
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

func (w *informerWatch[K, WK, WV]) requeueIndexed(r *run[K], sh *sharding[K], bucket int) bool {
	if w.same == nil {
		return false
	}
	name := w.bucketIndex(sh)
	if name == "" {
		return false
	}
	for _, e := range w.inf.ByIndex(name, strconv.Itoa(bucket)) {
		w.requeueEntry(r, e, nil)
	}
	return true
}

func (w *informerWatch[K, WK, WV]) requeueScan(r *run[K], sh *sharding[K], buckets map[int]struct{}) {
	keep := func(k K) bool {
		_, ok := buckets[sh.bucketOf(k)]
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
// that keep (if not nil) accepts, as if e were listed afresh: through the
// predicates, as an initial-list addition.
func (w *informerWatch[K, WK, WV]) requeueEntry(r *run[K], e informer.Entry[WK, WV], keep func(K) bool) {
	defer r.recoverWatch(w, e.Key)
	ch := Change[WK, WV]{Kind: Added, Key: e.Key, New: e.Value, InitialList: true}
	for _, p := range w.preds {
		if !p(ch) {
			return
		}
	}
	ev := enqueueEvent{prio: queue.PriorityLow}
	if w.same != nil {
		r.enqueue(ev, w.same(e.Key))
		return
	}
	for _, k := range w.toKeys(e.Key, e.Value) {
		if keep(k) {
			r.enqueue(ev, k)
		}
	}
}
