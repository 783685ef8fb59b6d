package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// shardMemKeys is the size of the memory-per-replica scenario.
const shardMemKeys = 100_000

// BenchmarkShardedMemory: the heap each replica of a sharded controller
// needs to cache shardMemKeys objects of ~560 B of JSON (newPgObj) held in
// etcd under etcdstore.Buckets' layout, for N = 1, 2, 4 replicas in one
// process (memlock for the leases: they hold no keys). Per N and per mode
// (cache=bucketed: informer.Bucketed, each replica caches its buckets;
// cache=all: the same store unfiltered, each replica caches every key)
// one op starts N replicas, waits until the buckets are settled, every
// replica's cache holds exactly its buckets' keys (bucketed) or all
// (all), and every key has been reconciled once; then runs the GC twice
// and reports the live heap over the heap before the replicas started,
// divided by N (MB/replica), and the most keys one replica caches. The two
// modes alternate which goes first. Needs etcd:
//
//	scripts/servers.sh start; eval "$(scripts/servers.sh env)"
//	go -C bench test -run '^$' -bench ShardedMemory -benchtime 1x -count 3 .
func BenchmarkShardedMemory(b *testing.B) {
	if os.Getenv(testserver.EtcdEndpointsEnv) == "" && !testserver.Integration() {
		b.Skipf("SKIPPED: %s is not set, so there is no etcd to measure", testserver.EtcdEndpointsEnv)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(b), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	prefix := "/converge-bench/shardmem/" + strconv.FormatUint(rand.Uint64(), 36) + "/"
	store := must.Do(etcdstore.NewBuckets[pgObj](cli, prefix, shardBuckets))
	shardMemLoad(b, cli, store, prefix)
	defer func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) }()

	for _, n := range []int{1, 2, 4} {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			var mb, most [2][]float64 // [0]: bucketed, [1]: all
			for i := 0; b.Loop(); i++ {
				for j := range 2 {
					mode := (i + j) % 2
					m, k := shardMemOnce(b, store, n, mode == 0)
					mb[mode] = append(mb[mode], m)
					most[mode] = append(most[mode], float64(k))
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(mb[0]), "bucketed-MB/replica")
			b.ReportMetric(median(mb[1]), "all-MB/replica")
			b.ReportMetric(median(most[0]), "bucketed-keys/replica")
			b.ReportMetric(median(mb[0])/median(mb[1]), "bucketed/all")
		})
	}
}

// shardMemLoad writes shardMemKeys objects k1..kn in store's layout, 100
// per transaction.
func shardMemLoad(b *testing.B, cli *clientv3.Client, store *etcdstore.Buckets[pgObj], prefix string) {
	b.Helper()
	var ops []clientv3.Op
	for i := 1; i <= shardMemKeys; i++ {
		k := "k" + strconv.Itoa(i)
		data, err := json.Marshal(newPgObj(k))
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(prefix+strconv.Itoa(store.BucketOf(k))+"/"+k, string(data)))
		if len(ops) == 100 || i == shardMemKeys {
			if _, err := cli.Txn(b.Context()).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}

// shardMemOnce runs n replicas over store until each caches what it
// should and every key has been reconciled, and returns the live heap per
// replica in MB and the most keys one replica caches.
func shardMemOnce(b *testing.B, store *etcdstore.Buckets[pgObj], n int, bucketed bool) (mbPerReplica float64, most int) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	locks := memlock.NewLocks()
	ids := shardIDs(n)
	var (
		reconciled atomic.Int64
		wg         sync.WaitGroup
		infs       = make([]*informer.Informer[string, pgObj], n)
		shs        = make([]*shard.Sharder, n)
	)
	ctx, cancel := context.WithCancel(context.Background())
	for i, id := range ids {
		cfg := shardConfig
		cfg.Identity = id
		sh, err := shard.New(locks, cfg)
		if err != nil {
			b.Fatal(err)
		}
		var src informer.Source[string, pgObj] = store
		if bucketed {
			src = informer.Bucketed[string, pgObj](store, store.BucketOf)
		}
		inf := must.Do(informer.New("objs", src, informer.WithLogger(discardLog)))
		rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
			if _, ok := inf.Get(key); ok {
				reconciled.Add(1)
			}
			return reconcile.Result{}, nil
		})
		m := shardManager(b, sh, inf, rec)
		infs[i], shs[i] = inf, sh
		wg.Go(func() { _ = m.Run(ctx) })
	}
	owners := shard.Assign(ids, shardBuckets)
	want := make(map[string]int, n)
	for i := 1; i <= shardMemKeys; i++ {
		want[owners[store.BucketOf("k"+strconv.Itoa(i))]]++
	}
	ready := func() bool {
		for i, id := range ids {
			st := shs[i].Status()
			if len(st.Campaigning) > 0 || len(st.Releasing) > 0 {
				return false
			}
			held := 0
			for _, h := range st.Held {
				if owners[h.ID] != id {
					return false
				}
				held++
			}
			expect := shardMemKeys
			if bucketed {
				expect = want[id]
			}
			if infs[i].Len() != expect {
				return false
			}
		}
		return reconciled.Load() >= shardMemKeys
	}
	for deadline := time.Now().Add(shardTimeout); !ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("replicas=%d bucketed=%v: not settled after %v (reconciled %d)", n, bucketed, shardTimeout, reconciled.Load())
		}
	}
	after := heap()
	for _, inf := range infs {
		most = max(most, inf.Len())
	}
	cancel()
	wg.Wait()
	return float64(int64(after)-int64(before)) / float64(n) / 1e6, most
}
