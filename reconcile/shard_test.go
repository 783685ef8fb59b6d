package reconcile_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
	"github.com/converge-go/converge/reconcile"
)

// The tests in this file run in a synctest bubble: every clock is the
// bubble's fake time, so the timings are exact and nothing sleeps.
const shardBuckets = 16

// shardRun is one reconcile as a sharded reconciler saw it.
type shardRun struct {
	key, replica string
	bucket       shard.Bucket
	start, end   time.Time
	open         bool
	cause        error // the context's cause if it ended the reconcile
}

// shardLog records every reconcile and fails the test if two of one key
// ever overlap, or one runs outside its key's bucket.
type shardLog struct {
	t    *testing.T
	mu   sync.Mutex
	runs []*shardRun
}

func (l *shardLog) reconciler(replica string, hold time.Duration) reconcile.Reconciler[string] {
	return reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		b, ok := shard.FromContext(ctx)
		assert.True(l.t, ok, "a sharded reconcile's context carries its bucket")
		assert.Equal(l.t, shard.BucketOf(key, shardBuckets), b.ID, "key %s", key)
		r := l.begin(key, replica, b)
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			r.cause = context.Cause(ctx)
		}
		l.end(r)
		return reconcile.Result{}, r.cause
	})
}

func (l *shardLog) begin(key, replica string, b shard.Bucket) *shardRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if r.key == key && r.open {
			l.t.Errorf("key %s: %s reconciles in %v while %s still does in %v", key, replica, b, r.replica, r.bucket)
		}
	}
	r := &shardRun{key: key, replica: replica, bucket: b, start: time.Now(), open: true}
	l.runs = append(l.runs, r)
	return r
}

func (l *shardLog) end(r *shardRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.open, r.end = false, time.Now()
}

// of returns the finished reconciles of key by replica.
func (l *shardLog) of(key, replica string) []shardRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []shardRun
	for _, r := range l.runs {
		if r.key == key && r.replica == replica && !r.open {
			out = append(out, *r)
		}
	}
	return out
}

func (l *shardLog) all() []shardRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]shardRun, len(l.runs))
	for i, r := range l.runs {
		out[i] = *r
	}
	return out
}

type shardedReplica struct {
	id     string
	s      *shard.Sharder
	c      *reconcile.Controller[string]
	inf    *informer.Informer[string, int]
	m      *reconcile.Manager
	cancel context.CancelFunc
	done   chan error
}

func startShardedReplica(t *testing.T, id string, locks shard.Backend, store *memstore.Store[string, int], log *shardLog, hold time.Duration) *shardedReplica {
	t.Helper()
	return startReplicaOver(t, id, locks, log, hold, store)
}

// startReplicaOver is startShardedReplica with the informer following src.
func startReplicaOver(t *testing.T, id string, locks shard.Backend, log *shardLog, hold time.Duration, src informer.Source[string, int]) *shardedReplica {
	t.Helper()
	s, err := shard.New(locks, shard.Config{Name: "ints", Identity: id, Buckets: shardBuckets,
		LeaseDuration: bubbleLease, RenewDeadline: bubbleRenew, RetryPeriod: bubbleRetry})
	require.NoError(t, err)
	inf := must.Do(informer.New("ints", src, informer.WithLogger(quietLogger)))
	c, err := reconcile.New("ints", log.reconciler(id, hold), reconcile.For(inf), reconcile.WithShards(s),
		reconcile.WithWorkers(4), quiet)
	require.NoError(t, err)
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	ctx, cancel := context.WithCancel(context.Background())
	r := &shardedReplica{id: id, s: s, c: c, inf: inf, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	return r
}

func (r *shardedReplica) stop(t *testing.T) {
	r.cancel()
	require.NoError(t, <-r.done)
}

// settled waits until the replicas hold every bucket as Assign says over
// them, checking every bubbleRetry.
func settled(t *testing.T, rs ...*shardedReplica) {
	t.Helper()
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.id
	}
	want := shard.Assign(ids, shardBuckets)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(bubbleRetry) {
		require.True(t, time.Now().Before(deadline), "buckets not settled on %v", ids)
		ok, total := true, 0
		for _, r := range rs {
			st := r.s.Status()
			total += len(st.Held)
			for _, b := range st.Held {
				ok = ok && want[b.ID] == r.id
			}
			ok = ok && len(st.Releasing) == 0
		}
		if ok && total == shardBuckets {
			return
		}
	}
}

func storeWithKeys(n int) *memstore.Store[string, int] {
	store := must.Do(memstore.New[string, int]())
	for i := range n {
		store.Put(fmt.Sprintf("key-%03d", i), i)
	}
	return store
}

func TestShardedControllersShouldSplitTheKeysByBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(100)
		locks := memlock.NewLocks()
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", locks, store, log, 10*time.Millisecond)
		b := startShardedReplica(t, "b", locks, store, log, 10*time.Millisecond)
		settled(t, a, b)
		time.Sleep(time.Second)
		store.Put("key-007", 1000) // a change reaches only its owner
		time.Sleep(time.Second)
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		for i := range 100 {
			key := fmt.Sprintf("key-%03d", i)
			owner := owners[shard.BucketOf(key, shardBuckets)]
			assert.NotEmpty(t, log.of(key, owner), "%s reconciled by its owner %s", key, owner)
		}
		owner := owners[shard.BucketOf("key-007", shardBuckets)]
		last := log.of("key-007", owner)
		require.NotEmpty(t, last)
		assert.Greater(t, last[len(last)-1].start, last[0].start.Add(time.Second/2), "the change was reconciled after settling")
		a.stop(t)
		b.stop(t)
	})
}

// When b joins, the buckets that move to it are drained on a (its
// reconciles in flight finish, no new ones start) and only then acquired
// by b, which reconciles every key of them once (nothing changes).
func TestEveryKeyOfAMovedBucketShouldBeReconciledOnceByTheNewOwnerAfterTheOldOneDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 200
		store := storeWithKeys(keys)
		locks := memlock.NewLocks()
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", locks, store, log, 50*time.Millisecond)
		settled(t, a)
		// Still reconciling its 200 keys (4 workers × 50ms) when b joins.
		b := startShardedReplica(t, "b", locks, store, log, 50*time.Millisecond)
		settled(t, a, b)
		time.Sleep(5 * time.Second)
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		moved := 0
		for i := range keys {
			key := fmt.Sprintf("key-%03d", i)
			if owners[shard.BucketOf(key, shardBuckets)] != "b" {
				assert.Empty(t, log.of(key, "b"), "%s is not b's", key)
				continue
			}
			moved++
			assert.Len(t, log.of(key, "b"), 1, "%s reconciled once by its new owner", key)
		}
		assert.NotZero(t, moved)
		for _, r := range log.all() {
			assert.NoError(t, r.cause, "a hand-over drains; it does not cancel (%s on %s)", r.key, r.replica)
		}
		a.stop(t)
		b.stop(t)
	})
}

// A reconcile still running when its bucket must move gets the shutdown
// grace; past it, it is cancelled with ErrBucketLost, and the bucket is
// handed over only after it returned (the log checks the order).
func TestAHandOverShouldCancelReconcilesThatOutliveTheGraceWithErrBucketLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Only keys whose buckets move to b: whichever a is reconciling
		// when b joins must be handed over.
		owners := shard.Assign([]string{"a", "b"}, shardBuckets)
		store := must.Do(memstore.New[string, int]())
		for i := 0; store.Len() < 40; i++ {
			if key := fmt.Sprintf("key-%03d", i); owners[shard.BucketOf(key, shardBuckets)] == "b" {
				store.Put(key, i)
			}
		}
		locks := memlock.NewLocks()
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", locks, store, log, time.Hour) // never finishes by itself
		settled(t, a)
		b := startShardedReplica(t, "b", locks, store, log, time.Millisecond)
		settled(t, a, b)
		lost := 0
		for _, r := range log.all() {
			if r.replica == "a" && r.cause != nil {
				assert.ErrorIs(t, r.cause, reconcile.ErrBucketLost)
				_, failing := a.c.Status(r.key)
				assert.False(t, failing, "%s: a reconcile cut short by the hand-over is not a failure", r.key)
				lost++
			}
		}
		assert.NotZero(t, lost, "a's reconciles of moved buckets were cancelled after the grace")
		b.stop(t)
		a.stop(t)
	})
}

func TestWithShardsShouldRejectBadInput(t *testing.T) {
	locks := memlock.NewLocks()
	s, err := shard.New(locks, shard.Config{Name: "x", Identity: "a"})
	require.NoError(t, err)
	inf := must.Do(informer.New("ints", must.Do(memstore.New[string, int]())))
	_, err = reconcile.New("a", reconcile.Func[string](nil), reconcile.For(inf))
	require.Error(t, err)
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	_, err = reconcile.New("a", rec, reconcile.For(inf), reconcile.WithShards(nil))
	assert.ErrorContains(t, err, "WithShards(nil)")
	_, err = reconcile.New("a", rec, reconcile.For(inf), reconcile.WithShards(s), reconcile.WithShardKey[string](nil))
	assert.ErrorContains(t, err, "WithShardKey(nil)")
	_, err = reconcile.New("a", rec, reconcile.For(inf), reconcile.WithShards(s), reconcile.WithShardKey(func(k int) string { return "" }))
	assert.ErrorContains(t, err, "WithShardKey: func(int) string does not hash keys of type string")
	_, err = reconcile.New("a", rec, reconcile.For(inf), reconcile.WithShardKey(func(k string) string { return k }))
	assert.ErrorContains(t, err, "WithShardKey without WithShards")

	ints := must.Do(informer.New("byint", must.Do(memstore.New[int, int]())))
	intRec := reconcile.Func(func(context.Context, int) (reconcile.Result, error) { return reconcile.Result{}, nil })
	_, err = reconcile.New("b", intRec, reconcile.For(ints), reconcile.WithShards(s))
	assert.ErrorContains(t, err, "keys of type int need WithShardKey")
	_, err = reconcile.New("b", intRec, reconcile.For(ints), reconcile.WithShards(s), reconcile.WithShardKey(strconv.Itoa))
	assert.NoError(t, err, "an int key is hashed by the function given")
}

func TestShardMetricsShouldReportTheBucketsHeldAndTheirEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(10)
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", memlock.NewLocks(), store, log, time.Millisecond)
		settled(t, a)
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(reconcile.ShardMetrics(a.s)))
		assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP converge_shard_buckets Buckets of this replica, by state (held, releasing, campaigning)
# TYPE converge_shard_buckets gauge
converge_shard_buckets{identity="a",state="campaigning"} 0
converge_shard_buckets{identity="a",state="held"} 16
converge_shard_buckets{identity="a",state="releasing"} 0
# HELP converge_shard_members Members this replica sees, by state (live, suspect)
# TYPE converge_shard_members gauge
converge_shard_members{identity="a",state="live"} 1
converge_shard_members{identity="a",state="suspect"} 0
`), "converge_shard_buckets", "converge_shard_members"))
		n, err := testutil.GatherAndCount(reg, "converge_shard_bucket_epoch")
		require.NoError(t, err)
		assert.Equal(t, shardBuckets, n)
		a.stop(t)
	})
}

// A replica cut off from the store loses its buckets' leases by its renew
// deadline: its reconciles in flight are cancelled with ErrBucketLost at
// once, before another replica can take the buckets over (the log checks
// the order), and the new owner then reconciles their keys.
func TestALostBucketLeaseShouldCancelItsReconcilesBeforeAnotherReplicaTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := storeWithKeys(40)
		locks := memlock.NewLocks()
		cut := &shardtest.Cuttable{Backend: locks}
		log := &shardLog{t: t}
		a := startShardedReplica(t, "a", cut, store, log, time.Hour) // a's reconciles never finish by themselves
		b := startShardedReplica(t, "b", locks, store, log, time.Millisecond)
		settled(t, a, b)
		time.Sleep(bubbleRetry)
		cutAt := time.Now()
		cut.Cut()
		time.Sleep(bubbleRenew + time.Millisecond)
		inFlight := 0
		for _, r := range log.all() {
			if r.replica == "a" {
				require.False(t, r.open, "%s: a's reconcile ended by its renew deadline", r.key)
				assert.ErrorIs(t, r.cause, reconcile.ErrBucketLost, r.key)
				assert.LessOrEqual(t, r.end.Sub(cutAt), bubbleRenew, r.key)
				inFlight++
			}
		}
		require.NotZero(t, inFlight)
		// b takes a's buckets once their leases lapsed, and reconciles
		// their keys.
		for deadline := time.Now().Add(time.Minute); len(b.s.Status().Held) < shardBuckets; time.Sleep(bubbleRetry) {
			require.True(t, time.Now().Before(deadline), "b takes every bucket")
		}
		time.Sleep(time.Second)
		for i := range 40 {
			key := fmt.Sprintf("key-%03d", i)
			assert.NotEmpty(t, log.of(key, "b"), "%s reconciled by b", key)
		}
		b.stop(t)
		cut.Restore()
		a.stop(t)
	})
}
