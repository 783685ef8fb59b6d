package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
	"github.com/converge-go/converge/reconcile"
)

// The sharding scenarios: N replicas in one process, each a
// Manager with its own shard.Sharder, informer and sharded controller with
// one worker, over one memstore.Store and one memlock.Locks (loopback: no
// network, so what is measured is the sharding itself). Every reconcile
// reads its key's value from its replica's informer and then waits
// shardCallTime, a real sleep: the external call of a slow cloud API, the
// work sharding exists to spread.

const (
	// shardKeys is the number of keys: enough that one replica takes
	// about 8 s to reconcile them all, eight replicas about 1 s.
	shardKeys = 4000
	// shardCallTime is the external call each reconcile waits on.
	shardCallTime = 2 * time.Millisecond
	// shardBuckets is shard.DefaultBuckets, which 1, 2, 4 and 8 divide.
	shardBuckets = shard.DefaultBuckets
	// shardTimeout bounds every wait of the sharding scenarios.
	shardTimeout = 2 * time.Minute
	// shardQuiet is how long no reconcile may finish before a phase that
	// must not see the previous phase's leftovers begins.
	shardQuiet = 200 * time.Millisecond
)

// shardReplicaCounts are the replica counts of the throughput scenario;
// the first is the baseline of the speed-ups.
var shardReplicaCounts = []int{1, 2, 4, 8}

// shardConfig has short lease timings (lease 2 s, renew deadline
// 1.4 s, retry 100 ms, list every retry): a graceful hand-over costs
// about ListPeriod + JitterFactor×RetryPeriod.
var shardConfig = shard.Config{
	Name: "bench", Buckets: shardBuckets,
	LeaseDuration: 2 * time.Second, RenewDeadline: 1400 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
}

// BenchmarkShardedThroughput: shardKeys keys reconciled by N replicas
// (replicas=1, 2, 4, 8), each with one worker and a reconcile that waits
// shardCallTime. Each b.N iteration runs two phases on a fresh cluster:
//
//   - cold: the store holds every key at value 1; all N Managers start
//     at once; timed until every key has been reconciled once (reading
//     value 1), bucket acquisition included: at first each replica sees
//     only itself and takes what it can, then hands over what it should
//     not hold. Reports cold-keys/s, cold-speedup (over replicas=1 of the
//     same run), settle-ms (start until every replica holds exactly the
//     buckets shard.Assign gives it, with none campaigning or releasing)
//     and cold-reconciles/key (the hand-overs' repeats).
//   - steady: once settled and no reconcile has finished for shardQuiet,
//     every key is written value 2; timed from before the first write
//     until every key has been reconciled reading 2. Reports keys/s,
//     speedup over replicas=1 of the same run, efficiency (speedup/N;
//     the target is ≥ 0.8) and imbalance: the keys of the busiest
//     replica over shardKeys/N, which bounds efficiency at 1/imbalance;
//     call-µs, the mean reconcile call (shardCallTime plus timer and
//     scheduling delay); busy, the time the busiest replica's worker
//     spent in reconcile calls over the phase's time (1 − busy is time it
//     waited for work: queueing, admission, hand-off).
//
// ns/op is suppressed. The speed-ups need replicas=1 to have run first in
// the same invocation; run with -benchtime 1x.
func BenchmarkShardedThroughput(b *testing.B) {
	for _, be := range shardBackends {
		b.Run("locks="+be.name, func(b *testing.B) { shardThroughputOver(b, be.locks) })
	}
}

func shardThroughputOver(b *testing.B, locks func(*testing.B) shard.Backend) {
	var base, coldBase float64 // replicas=1's keys/s
	for _, n := range shardReplicaCounts {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			var cold, steady, settle, call, busiest time.Duration
			var coldCalls int
			for range b.N {
				c := newShardCluster(locks(b))
				r := c.throughputOnce(b, n)
				c.stopAll(b)
				cold += r.cold
				steady += r.steady
				settle += r.settle
				coldCalls += r.coldCalls
				call += r.call
				busiest += r.busiest
			}
			keysPerSec := float64(b.N*shardKeys) / steady.Seconds()
			coldPerSec := float64(b.N*shardKeys) / cold.Seconds()
			if n == 1 {
				base, coldBase = keysPerSec, coldPerSec
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(keysPerSec, "keys/s")
			b.ReportMetric(coldPerSec, "cold-keys/s")
			if base > 0 {
				b.ReportMetric(keysPerSec/base, "speedup")
				b.ReportMetric(keysPerSec/base/float64(n), "efficiency")
				b.ReportMetric(coldPerSec/coldBase, "cold-speedup")
			}
			b.ReportMetric(float64(settle.Milliseconds())/float64(b.N), "settle-ms")
			b.ReportMetric(float64(coldCalls)/float64(b.N*shardKeys), "cold-reconciles/key")
			b.ReportMetric(shardImbalance(shardIDs(n)), "imbalance")
			b.ReportMetric(float64(call.Microseconds())/float64(b.N), "call-µs")
			b.ReportMetric(busiest.Seconds()/steady.Seconds(), "busy")
		})
	}
}

// BenchmarkShardedRebalance: a settled cluster whose every key has been
// reconciled changes membership, one sub-benchmark per change:
// leave/4to3 (the last replica's Manager is cancelled: a graceful leave)
// join/3to4 (a fourth replica's Manager starts) and kill/4to3 (the last
// replica's backend is cut off, as if killed: its leases lapse; then its
// Manager is cancelled). Reports rebalance-ms,
// from the change until every remaining replica holds exactly the buckets
// shard.Assign gives it with none campaigning or releasing;
// catchup-ms, from the change until every key of every moved bucket has
// been reconciled by its new owner; buckets-moved and keys-moved (the
// keys of those buckets). Means over b.N changes, each on a fresh cluster.
func BenchmarkShardedRebalance(b *testing.B) {
	for _, be := range shardBackends {
		b.Run("locks="+be.name, func(b *testing.B) { shardRebalanceOver(b, be.locks) })
	}
}

func shardRebalanceOver(b *testing.B, locks func(*testing.B) shard.Backend) {
	for _, ch := range []struct {
		name          string
		before, after int
		kill          bool
	}{{"leave/4to3", 4, 3, false}, {"join/3to4", 3, 4, false}, {"kill/4to3", 4, 3, true}} {
		b.Run(ch.name, func(b *testing.B) {
			var rebalance, catchup time.Duration
			var buckets, keys int
			for range b.N {
				c := newShardCluster(locks(b))
				r := c.rebalanceOnce(b, ch.before, ch.after, ch.kill)
				c.stopAll(b)
				rebalance += r.rebalance
				catchup += r.catchup
				buckets += r.buckets
				keys += r.keys
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(rebalance.Milliseconds())/n, "rebalance-ms")
			b.ReportMetric(float64(catchup.Milliseconds())/n, "catchup-ms")
			b.ReportMetric(float64(buckets)/n, "buckets-moved")
			b.ReportMetric(float64(keys)/n, "keys-moved")
		})
	}
}

type shardThroughput struct {
	cold, steady, settle time.Duration
	coldCalls            int
	// call is the steady phase's mean reconcile call; busiest the most
	// time one replica spent in its steady reconciles.
	call, busiest time.Duration
}

// throughputOnce runs the cold and steady phases with n replicas.
func (c *shardCluster) throughputOnce(b *testing.B, n int) shardThroughput {
	var r shardThroughput
	ids := shardIDs(n)
	coldDone := c.tr.begin(1, shardKeyNames, nil)
	settle()
	start := time.Now()
	for _, id := range ids {
		c.start(b, id)
	}
	settled := make(chan time.Duration, 1)
	go func() { settled <- c.waitSettled(ids, start) }()
	if !waitOrTimeout(coldDone, shardTimeout) {
		b.Fatalf("cold: %d of %d keys left after %v", c.tr.left(), shardKeys, shardTimeout)
	}
	r.cold = time.Since(start)
	if r.settle = <-settled; r.settle < 0 {
		b.Fatalf("cold: not settled after %v: %v", shardTimeout, c.statuses())
	}
	c.waitQuiet()
	r.coldCalls = c.tr.calls()

	steadyDone := c.tr.begin(2, shardKeyNames, nil)
	start = time.Now()
	for _, k := range shardKeyNames {
		c.store.Put(k, 2)
	}
	if !waitOrTimeout(steadyDone, shardTimeout) {
		b.Fatalf("steady: %d of %d keys left after %v", c.tr.left(), shardKeys, shardTimeout)
	}
	r.steady = time.Since(start)
	r.call, r.busiest = c.tr.load()
	return r
}

type shardMove struct {
	rebalance, catchup time.Duration
	buckets, keys      int
}

// rebalanceOnce starts before replicas, waits until they have settled and
// reconciled every key, then starts or stops the last replica so that
// after run, and measures the hand-over.
func (c *shardCluster) rebalanceOnce(b *testing.B, before, after int, kill bool) shardMove {
	ids := shardIDs(before)
	done := c.tr.begin(1, shardKeyNames, nil)
	start := time.Now()
	for _, id := range ids {
		c.start(b, id)
	}
	if !waitOrTimeout(done, shardTimeout) || c.waitSettled(ids, start) < 0 {
		b.Fatalf("start: %d keys left, statuses %v", c.tr.left(), c.statuses())
	}
	c.waitQuiet()

	newIDs := shardIDs(after)
	owners := shard.Assign(newIDs, shardBuckets)
	held := c.holders()
	var m shardMove
	moved := make(map[int]bool)
	for bkt, o := range owners {
		if held[bkt] != o {
			moved[bkt] = true
			m.buckets++
		}
	}
	var keys []string
	for _, k := range shardKeyNames {
		if moved[shard.BucketOf(k, shardBuckets)] {
			keys = append(keys, k)
		}
	}
	m.keys = len(keys)
	caught := c.tr.begin(1, keys, func(k string) string { return owners[shard.BucketOf(k, shardBuckets)] })
	settle()
	start = time.Now()
	left := make(chan struct{})
	if after > before {
		c.start(b, newIDs[len(newIDs)-1])
		close(left)
	} else {
		last := ids[len(ids)-1]
		if kill {
			c.cut(last)
		}
		go func() {
			defer close(left)
			c.stop(b, last)
		}()
	}
	defer func() { <-left }()
	if m.rebalance = c.waitSettled(newIDs, start); m.rebalance < 0 {
		b.Fatalf("not rebalanced after %v: %v", shardTimeout, c.statuses())
	}
	if !waitOrTimeout(caught, shardTimeout) {
		b.Fatalf("%d of %d moved keys not reconciled by their new owners after %v", c.tr.left(), m.keys, shardTimeout)
	}
	m.catchup = time.Since(start)
	return m
}

// ---- the cluster ----

// shardKeyNames are the keys, the same in every scenario.
var shardKeyNames = func() []string {
	ks := make([]string, shardKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%05d", i)
	}
	return ks
}()

// shardIDs returns the identities of the first n replicas.
func shardIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
	}
	return ids
}

// shardImbalance returns the keys of the replica of ids that
// shard.Assign gives the most keys, over shardKeys/len(ids).
func shardImbalance(ids []string) float64 {
	owners := shard.Assign(ids, shardBuckets)
	per := make(map[string]int)
	for _, k := range shardKeyNames {
		per[owners[shard.BucketOf(k, shardBuckets)]]++
	}
	most := 0
	for _, n := range per {
		most = max(most, n)
	}
	return float64(most) * float64(len(ids)) / shardKeys
}

// shardCluster is the shared store and locks, the replicas running over
// them, and the tracker their reconciles report to.
type shardCluster struct {
	store *memstore.Store[string, int]
	locks shard.Backend
	name  string // the Sharders' Name, fresh per cluster: backends are shared
	tr    *shardTracker

	mu   sync.Mutex
	reps map[string]*shardReplica // guarded by mu
}

// shardReplica is one running replica.
type shardReplica struct {
	sh     *shard.Sharder
	conn   *shardtest.Cuttable // its view of the locks, to kill it
	cancel context.CancelFunc
	done   chan error // Manager.Run's result
}

// newShardCluster returns a cluster whose store holds every key at value 1.
func newShardCluster(locks shard.Backend) *shardCluster {
	c := &shardCluster{
		store: must.Do(memstore.New[string, int]()), locks: locks, name: "bench-" + strconv.FormatUint(rand.Uint64(), 36),
		tr: &shardTracker{}, reps: make(map[string]*shardReplica),
	}
	for _, k := range shardKeyNames {
		c.store.Put(k, 1)
	}
	return c
}

var discardLog = slog.New(slog.DiscardHandler)

// start starts replica id's Manager.
func (c *shardCluster) start(b *testing.B, id string) {
	cfg := shardConfig
	cfg.Identity, cfg.Name = id, c.name
	conn := &shardtest.Cuttable{Backend: c.locks}
	sh, err := shard.New(conn, cfg)
	if err != nil {
		b.Fatal(err)
	}
	inf := must.Do(informer.New("keys", c.store))
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		began := time.Now()
		v, _ := inf.Get(key)
		t := time.NewTimer(shardCallTime)
		defer t.Stop()
		select {
		case <-ctx.Done(): // bucket lost or shutting down: not a reconcile
		case <-t.C:
			c.tr.saw(id, key, v, time.Since(began))
		}
		return reconcile.Result{}, nil
	})
	m := shardManager(b, sh, inf, rec)
	ctx, cancel := context.WithCancel(context.Background())
	r := &shardReplica{sh: sh, conn: conn, cancel: cancel, done: make(chan error, 1)}
	c.mu.Lock()
	c.reps[id] = r
	c.mu.Unlock()
	go func() { r.done <- m.Run(ctx) }()
}

// shardManager returns a Manager running sh, inf and a controller
// sharded over sh with one worker that reconciles inf's keys with rec.
func shardManager[V any](b *testing.B, sh *shard.Sharder, inf *informer.Informer[string, V], rec reconcile.Reconciler[string]) *reconcile.Manager {
	ctrl, err := reconcile.New("keys", rec, reconcile.For(inf), reconcile.WithWorkers(1),
		reconcile.WithShards(sh), reconcile.WithLogger(discardLog))
	if err != nil {
		b.Fatal(err)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: sh, Logger: discardLog})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.AddController(ctrl); err != nil {
		b.Fatal(err)
	}
	return m
}

// stop stops replica id (a graceful leave) and waits for its Manager.
func (c *shardCluster) stop(b *testing.B, id string) {
	c.mu.Lock()
	r := c.reps[id]
	delete(c.reps, id)
	c.mu.Unlock()
	r.cancel()
	if err := <-r.done; err != nil {
		b.Errorf("replica %s: %v", id, err)
	}
}

// cut cuts replica id off the locks, as a kill looks to the others.
func (c *shardCluster) cut(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reps[id].conn.Cut()
}

// stopAll stops every replica at once.
func (c *shardCluster) stopAll(b *testing.B) {
	c.mu.Lock()
	ids := make([]string, 0, len(c.reps))
	for id := range c.reps {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { c.stop(b, id) })
	}
	wg.Wait()
}

// sharders returns the running replicas' Sharders by identity.
func (c *shardCluster) sharders() map[string]*shard.Sharder {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]*shard.Sharder, len(c.reps))
	for id, r := range c.reps {
		m[id] = r.sh
	}
	return m
}

// settledAs reports whether exactly the replicas ids run, each counts
// exactly ids as members, holds exactly the buckets shard.Assign(ids)
// gives it, and campaigns for and releases none.
func (c *shardCluster) settledAs(ids []string) bool {
	shs := c.sharders()
	if len(shs) != len(ids) {
		return false
	}
	owners := shard.Assign(ids, shardBuckets)
	for _, id := range ids {
		s, ok := shs[id]
		if !ok {
			return false
		}
		st := s.Status()
		if !slices.Equal(st.Members, ids) || len(st.Campaigning) > 0 || len(st.Releasing) > 0 {
			return false
		}
		var want []int
		for bkt, o := range owners {
			if o == id {
				want = append(want, bkt)
			}
		}
		if len(st.Held) != len(want) {
			return false
		}
		for i, h := range st.Held {
			if h.ID != want[i] {
				return false
			}
		}
	}
	return true
}

// waitSettled polls settledAs(ids) every millisecond and returns the time
// since start when it first holds, or -1 after shardTimeout.
func (c *shardCluster) waitSettled(ids []string, start time.Time) time.Duration {
	for time.Since(start) < shardTimeout {
		if c.settledAs(ids) {
			return time.Since(start)
		}
		time.Sleep(time.Millisecond)
	}
	return -1
}

// holders returns each bucket's holder ("" if none).
func (c *shardCluster) holders() []string {
	held := make([]string, shardBuckets)
	for id, s := range c.sharders() {
		for _, h := range s.Status().Held {
			held[h.ID] = id
		}
	}
	return held
}

// statuses describes every replica's Status, for a failure message.
func (c *shardCluster) statuses() string {
	var out []string
	for _, s := range c.sharders() {
		st := s.Status()
		out = append(out, fmt.Sprintf("%s: members %v held %d campaigning %v releasing %v",
			st.Identity, st.Members, len(st.Held), st.Campaigning, st.Releasing))
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// waitQuiet waits until no reconcile has finished for shardQuiet, so that
// the hand-overs' repeats are over before the next phase.
func (c *shardCluster) waitQuiet() {
	for c.tr.sinceLast() < shardQuiet {
		time.Sleep(shardQuiet / 4)
	}
}

// ---- the tracker ----

// shardTracker counts the reconciles of one phase at a time: which of the
// phase's keys have been reconciled by a replica that read the phase's
// value (and, if the phase says so, by the key's expected owner).
type shardTracker struct {
	mu sync.Mutex
	// Everything below is guarded by mu.
	want    int                     // the value a reconcile must read to count
	owner   func(key string) string // nil: any replica counts
	pending map[string]bool         // the phase's keys not yet counted
	done    chan struct{}           // closed when pending empties
	n       int                     // reconciles finished in the phase
	last    time.Time               // when the last reconcile finished
	// busy is the time each replica spent in the phase's reconciles, took
	// the sum over all replicas.
	busy map[string]time.Duration
	took time.Duration
}

// begin starts a phase over keys and returns its done channel.
func (t *shardTracker) begin(want int, keys []string, owner func(string) string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want, t.owner, t.n = want, owner, 0
	t.busy, t.took = make(map[string]time.Duration), 0
	t.pending = make(map[string]bool, len(keys))
	for _, k := range keys {
		t.pending[k] = true
	}
	t.done = make(chan struct{})
	if len(keys) == 0 {
		close(t.done)
	}
	return t.done
}

// saw records that replica id reconciled key, having read value v, in
// a call of d.
func (t *shardTracker) saw(id, key string, v int, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	t.last = time.Now()
	t.busy[id] += d
	t.took += d
	if v != t.want || !t.pending[key] || (t.owner != nil && t.owner(key) != id) {
		return
	}
	delete(t.pending, key)
	if len(t.pending) == 0 {
		close(t.done)
	}
}

func (t *shardTracker) left() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// load returns the mean duration of the phase's reconcile calls and the
// longest time one replica spent in them.
func (t *shardTracker) load() (mean, most time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.busy {
		most = max(most, d)
	}
	if t.n > 0 {
		mean = t.took / time.Duration(t.n)
	}
	return mean, most
}

func (t *shardTracker) calls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *shardTracker) sinceLast() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Since(t.last)
}
