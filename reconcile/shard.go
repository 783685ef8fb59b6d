package reconcile

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/converge-go/converge/internal/workqueue"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// ErrBucketLost is the cause (context.Cause) of a sharded reconcile's
// context when the lease on its key's bucket ended, or when the bucket was
// being handed over and the reconcile outlived the shutdown grace.
var ErrBucketLost = errors.New("shard bucket lost")

// WithShards makes the controller sharded over s: it runs on every replica
// (a Manager runs it whether or not this replica leads), and reconciles only
// the keys whose bucket (see WithShardKey) this
// replica holds. Keys of other buckets are dropped when queued and when
// taken from the queue, and a reconcile starts only while its bucket's
// lease is valid by the local clock (leader.LeaseValid, as
// leader.Elector.IsLeader judges), not merely until the lease's end has
// been noticed. When a bucket is acquired, every key of it that
// the watched informers hold is queued once, at low priority (behind fresh
// changes, as an initial list is), so that the keys of a bucket that moved
// here are all reconciled; a key may be reconciled twice when its bucket
// is acquired while the controller's initial list is still being
// delivered. Keys whose fresh changes this replica dropped because their
// bucket was not held here (during the last 2×s.MoveWithin(), at most
// 65,536 keys per half of that) are queued first, at normal priority:
// they may have changed while the bucket had no owner, and must not wait
// behind the bulk of the moved keys at each move. A replica sees the
// changes of buckets it does not hold only through an informer that
// caches every bucket (not informer.Bucketed) or a source.
//
// When a bucket must be given up, its keys stop
// being taken, its reconciles in progress get the shutdown grace
// (WithShutdownGrace) to finish, and then their contexts are cancelled with
// ErrBucketLost; the bucket is released only after they have returned. A
// reconcile's context carries its bucket and epoch (shard.FromContext), for
// writes fenced on the epoch, and is cancelled with ErrBucketLost the
// moment the bucket's lease ends.
//
// Taking a bucket costs that bucket's keys: an informer watched with For
// is given an index of its keys by bucket (added on the first acquisition;
// it costs one index entry per cached key), so only the bucket's keys are
// listed and go through the predicates. An informer watched with Watch
// maps its keys to the controller's through toKeys, which no index can
// follow: it is scanned whole, but every bucket acquired while a scan runs
// waits for the next scan, which serves them all, so a replica that takes
// many buckets at once scans it about twice, not once per bucket.
//
// A watched informer over informer.Bucketed caches only the held buckets:
// a bucket's keys are loaded into it before the bucket admits any, and
// dropped after its last reconcile (retrying a failed load every 500 ms
// until the bucket must be given up); its bucket function must agree with
// the shard key (WithShardKey) and s.Buckets().
//
// Keys are hashed by WithShardKey's function; without it, a string key is
// hashed as itself, and New fails for any other key type. s must not have
// started running: New registers the controller with it.
// Under a Manager, s must be its ManagerOptions.Shards (AddController
// refuses another), which runs it.
// Keys from FromFunc and FromChannel are admitted by bucket like any other;
// the controller remembers every key they delivered (so its memory grows
// with their distinct keys) and queues those of a bucket again when it
// acquires it. Default: not sharded.
func WithShards(s *shard.Sharder) Option {
	return func(st *settings) error {
		if s == nil {
			return errors.New("WithShards(nil)")
		}
		st.sharder = s
		return nil
	}
}

// WithShardKey sets the bytes a sharded controller (WithShards) hashes a
// key by, to pick its bucket: shard.BucketOf(keyOf(key), s.Buckets()).
// keyOf must be fast and return the same string for a key every time; an
// informer over informer.Bucketed must bucket by the same string. K is
// inferred from keyOf and must be the controller's key type, or New fails;
// so does WithShardKey without WithShards. Default: a string key is hashed
// as itself; other key types need WithShardKey.
func WithShardKey[K comparable](keyOf func(K) string) Option {
	return func(st *settings) error {
		if keyOf == nil {
			return errors.New("WithShardKey(nil)")
		}
		st.shardKey = keyOf
		return nil
	}
}

// sharding is a sharded controller's view of the buckets it may reconcile.
type sharding[K comparable] struct {
	s       *shard.Sharder
	keyOf   func(K) string
	buckets int
	c       *Controller[K] // set by initShards

	mu sync.Mutex
	// held are the buckets whose keys are admitted, by ID: a bucket is in
	// it from the start of its ServeBucket until its stop, and admits no
	// key once removed. Guarded by mu.
	held map[int]*heldBucket
	// sourced are the keys FromFunc and FromChannel sources delivered, by
	// bucket, held here or not: queued again when their bucket is
	// acquired, as an informer's cached keys are. Guarded by mu.
	sourced map[int]map[K]struct{}

	// requeue queues the keys of an acquired bucket.
	requeue requeue[K]
	// missed are the keys whose changes were dropped because their
	// bucket was not held here. Guarded by mu.
	missed missed[K]
}

// heldBucket is one held bucket's admission state.
type heldBucket struct {
	b shard.Bucket
	// lease is ServeBucket's: valid while the bucket's lease is.
	lease context.Context
	// work is the parent of every reconcile of the bucket's keys: done
	// when the lease ends or the grace of a hand-over is over.
	work       context.Context
	cancelWork context.CancelCauseFunc
	// inflight counts reconciles of the bucket's keys in progress, and
	// drained is closed when it falls to 0 after the bucket stopped
	// admitting; both guarded by the sharding's mu.
	inflight int
	closed   bool
	drained  chan struct{}
}

// initShards builds the sharding of WithShards and WithShardKey for the
// controller's key type, and registers the controller with the Sharder.
func (c *Controller[K]) initShards() error {
	s := c.s.sharder
	if s == nil {
		if c.s.shardKey != nil {
			return errors.New("WithShardKey without WithShards: nothing is sharded")
		}
		return nil
	}
	var keyOf func(K) string
	switch f := c.s.shardKey.(type) {
	case nil:
		if reflect.TypeFor[K]() != reflect.TypeFor[string]() {
			return fmt.Errorf("WithShards: keys of type %v need WithShardKey (only a string key is hashed as itself)", reflect.TypeFor[K]())
		}
		keyOf = func(k K) string { return any(k).(string) }
	case func(K) string:
		keyOf = f
	default:
		return fmt.Errorf("WithShardKey: %T does not hash keys of type %v", f, reflect.TypeFor[K]())
	}
	sh := &sharding[K]{s: s, keyOf: keyOf, buckets: s.Buckets(), held: make(map[int]*heldBucket),
		missed: missed[K]{keep: 2 * s.MoveWithin()}, c: c}
	c.shards = sh
	if err := sh.s.Add(sh); err != nil {
		return fmt.Errorf("WithShards: %w", err)
	}
	return nil
}

// sharder returns the Sharder of a sharded controller, nil for another,
// for the Manager's check that it runs it.
func (c *Controller[K]) sharder() *shard.Sharder {
	if c.shards == nil {
		return nil
	}
	return c.shards.s
}

// sharded reports whether the controller runs on every replica.
func (c *Controller[K]) sharded() bool { return c.shards != nil }

// bucketOf returns key's bucket.
func (sh *sharding[K]) bucketOf(key K) int { return shard.BucketOf(sh.keyOf(key), sh.buckets) }

// admits reports whether key's bucket is held and admitting now. A fresh
// change (ev) of a key of a bucket not held here is remembered as missed
// (see missed).
func (sh *sharding[K]) admits(key K, ev enqueueEvent) bool {
	b := sh.bucketOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.held[b] != nil {
		return true
	}
	if ev.change && ev.prio != workqueue.PriorityLow { // not a list, a resync or a requeue
		sh.missed.add(b, key, sh.c.s.clock.Now())
	}
	return false
}

// begin admits one reconcile of key: it returns the key's held bucket,
// counted in flight until end, or nil if the bucket is not held here or
// its lease is not valid by the local clock (leader.LeaseValid, which then
// ends the lease: the bucket is given up, and acquired again if it is
// still this replica's).
func (sh *sharding[K]) begin(key K) *heldBucket {
	b := sh.bucketOf(key)
	sh.mu.Lock()
	hb := sh.held[b]
	if hb != nil {
		hb.inflight++
	} else {
		// Queued for a reason, but its bucket moved away meanwhile.
		sh.missed.add(b, key, sh.c.s.clock.Now())
	}
	sh.mu.Unlock()
	// Checked after counting the reconcile in flight, so that a drain
	// that starts meanwhile waits for it; outside mu, which the elector's
	// lock must not nest in.
	if hb != nil && !leader.LeaseValid(hb.lease) {
		sh.end(hb)
		sh.mu.Lock()
		sh.missed.add(b, key, sh.c.s.clock.Now())
		sh.mu.Unlock()
		return nil
	}
	return hb
}

// end ends a reconcile that begin admitted.
func (sh *sharding[K]) end(hb *heldBucket) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if hb.inflight--; hb.inflight == 0 && hb.closed {
		close(hb.drained)
	}
}

// scope makes a reconcile's context part of hb: cancelled with
// ErrBucketLost when hb's work ends, carrying hb's bucket.
func (hb *heldBucket) scope(ctx context.Context, release func()) (context.Context, func()) {
	inner, cancel := context.WithCancelCause(shard.NewContext(ctx, hb.b))
	stop := context.AfterFunc(hb.work, func() { cancel(context.Cause(hb.work)) })
	return inner, func() { stop(); cancel(nil); release() }
}

// ServeBucket implements shard.Handler: it admits b's keys, queues those
// the informers hold, and on stop drains b's reconciles (see WithShards).
func (sh *sharding[K]) ServeBucket(stop, lease context.Context, b shard.Bucket) {
	hb := &heldBucket{b: b, lease: lease, drained: make(chan struct{})}
	// Not a child of lease: the end of the lease must cancel with
	// ErrBucketLost, not the lease's own cause.
	hb.work, hb.cancelWork = context.WithCancelCause(context.WithoutCancel(lease))
	defer hb.cancelWork(ErrBucketLost)
	unhook := context.AfterFunc(lease, func() { hb.cancelWork(ErrBucketLost) })
	defer unhook()
	// Caches that hold only their held buckets (informer.Bucketed) load
	// b's keys before b admits any, and drop them after its last reconcile.
	release, ok := sh.c.acquireBucket(stop, b.ID)
	defer release()
	if !ok {
		return // stopped before b's keys could be loaded: nothing admitted
	}
	sh.mu.Lock()
	sh.held[b.ID] = hb
	sh.mu.Unlock()
	// Admitting first, then listing: a key that reaches the cache after
	// the listing is delivered, and admitted, as a change.
	sh.c.requeueBucket(b.ID)

	<-stop.Done()
	sh.mu.Lock()
	delete(sh.held, b.ID)
	hb.closed = true
	idle := hb.inflight == 0
	sh.mu.Unlock()
	if idle {
		return
	}
	if lease.Err() == nil {
		t := sh.c.s.clock.AfterFunc(sh.c.s.grace, func() { hb.cancelWork(ErrBucketLost) })
		defer t.Stop()
	}
	<-hb.drained
}

// bucketCache is a cache that holds only the buckets it is told to
// (*informer.Informer over informer.Bucketed; for other sources its
// methods do nothing).
type bucketCache interface {
	AcquireBucket(ctx context.Context, b int) error
	ReleaseBucket(b int)
}

// acquireBucket loads bucket's keys into every watched cache that holds
// only its buckets, retrying a failed load every loadRetry. ok is false if
// ctx was done first. release undoes the loads that were made, in either
// case.
func (c *Controller[K]) acquireBucket(ctx context.Context, bucket int) (release func(), ok bool) {
	var loaded []bucketCache
	release = func() {
		for _, bc := range loaded {
			bc.ReleaseBucket(bucket)
		}
	}
	for _, w := range c.watches {
		bc, isBC := w.cache().(bucketCache)
		if !isBC {
			continue
		}
		for {
			err := bc.AcquireBucket(ctx, bucket)
			if err == nil {
				loaded = append(loaded, bc)
				break
			}
			if ctx.Err() != nil {
				return release, false
			}
			c.s.logger.Warn("loading a bucket's keys failed; retrying", "controller", c.name, "bucket", bucket, "error", err)
			select {
			case <-ctx.Done():
				return release, false
			case <-c.s.clock.After(loadRetry):
			}
		}
	}
	return release, true
}

// loadRetry is how long acquireBucket waits before it loads a bucket again.
const loadRetry = 500 * time.Millisecond

// noteSourced records key, delivered by a FromFunc or FromChannel source,
// for requeueBucket. A no-op for a controller that is not sharded.
func (c *Controller[K]) noteSourced(key K) {
	sh := c.shards
	if sh == nil {
		return
	}
	b := sh.bucketOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.sourced == nil {
		sh.sourced = make(map[int]map[K]struct{})
	}
	if sh.sourced[b] == nil {
		sh.sourced[b] = make(map[K]struct{})
	}
	sh.sourced[b][key] = struct{}{}
}

// sourcedIn returns the keys of bucket that sources delivered.
func (sh *sharding[K]) sourcedIn(bucket int) []K {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	keys := make([]K, 0, len(sh.sourced[bucket]))
	for k := range sh.sourced[bucket] {
		keys = append(keys, k)
	}
	return keys
}
