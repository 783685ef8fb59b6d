package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// etcdSyncObjs is the size of the etcd initial-sync scenario.
const etcdSyncObjs = 100_000

// BenchmarkEtcdInitialSync measures an informer's initial sync of
// etcdSyncObjs objects of ~560 B of JSON (newPgObj) through etcdstore (one
// Get of the prefix, decode, cache), against the floor: the same Get, its
// values decoded into GOMAXPROCS maps on as many goroutines. One op is one
// floor sync and one etcdstore sync, alternating which goes first; reports
// the median of each and the median of the per-op ratios.
func BenchmarkEtcdInitialSync(b *testing.B) {
	cli := etcdBenchClient(b)
	prefix := "/converge-bench/sync/" + strconv.FormatUint(rand.Uint64(), 36) + "/"
	etcdLoad(b, cli, prefix, etcdSyncObjs)
	defer func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) }()
	timeSyncs(b, etcdSyncObjs, []syncRun{
		{"floor", func() int { return etcdFloorSync(b, cli, prefix) }},
		{"etcdstore", func() int { return etcdstoreSync(b, cli, prefix) }},
	}, [2]int{1, 0})
}

// syncRun is one initial sync that a benchmark times: run syncs once and
// returns how many objects it synced.
type syncRun struct {
	name string
	run  func() int
}

// timeSyncs runs every sync once per op of b, in an order that rotates so
// that each sees the same load, and fails b if one syncs other than want
// objects. It reports each sync's median ("<name>-ms") and, for each pair
// {a, b} of ratios, the median of the per-op ratios a/b
// ("<a's name>/<b's name>").
func timeSyncs(b *testing.B, want int, syncs []syncRun, ratios ...[2]int) {
	ms := make([][]float64, len(syncs)) // ms[k][i]: sync k's time in op i
	for i := 0; b.Loop(); i++ {
		for j := range syncs {
			k := (i + j) % len(syncs)
			start := time.Now()
			if got := syncs[k].run(); got != want {
				b.Fatalf("%s synced %d objects", syncs[k].name, got)
			}
			ms[k] = append(ms[k], float64(time.Since(start).Microseconds())/1000)
		}
	}
	perOp := make([][]float64, len(ratios))
	for r, p := range ratios {
		for i := range ms[p[0]] {
			perOp[r] = append(perOp[r], ms[p[0]][i]/ms[p[1]][i])
		}
	}
	b.ReportMetric(0, "ns/op")
	for k, s := range syncs {
		b.ReportMetric(median(ms[k]), s.name+"-ms")
	}
	for r, p := range ratios {
		b.ReportMetric(median(perOp[r]), syncs[p[0]].name+"/"+syncs[p[1]].name)
	}
}

// etcdstoreSync runs an informer over prefix until it has synced and
// returns how many objects its cache holds.
func etcdstoreSync(b *testing.B, cli *clientv3.Client, prefix string) int {
	return syncInformer(b, must.Do(etcdstore.New[pgObj](cli, prefix)))
}

// median returns the median of v, sorting it.
func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// etcdLoad writes n objects named k1..kn under prefix, 100 per transaction.
func etcdLoad(b *testing.B, cli *clientv3.Client, prefix string, n int) {
	b.Helper()
	var ops []clientv3.Op
	for i := 1; i <= n; i++ {
		data, err := json.Marshal(newPgObj("k" + strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(prefix+"k"+strconv.Itoa(i), string(data)))
		if len(ops) == 100 || i == n {
			if _, err := cli.Txn(b.Context()).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}

// etcdFloorSync reads prefix with one Get and decodes its values into one
// map per goroutine, GOMAXPROCS goroutines over contiguous shares, and
// returns how many it decoded.
func etcdFloorSync(b *testing.B, cli *clientv3.Client, prefix string) int {
	resp, err := cli.Get(b.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	kvs := resp.Kvs
	procs := runtime.GOMAXPROCS(0)
	maps := make([]map[string]pgObj, procs)
	share := (len(kvs) + procs - 1) / procs
	var wg sync.WaitGroup
	for i := range maps {
		mine := kvs[min(i*share, len(kvs)):min((i+1)*share, len(kvs))]
		maps[i] = make(map[string]pgObj, len(mine))
		wg.Go(func() {
			for _, kv := range mine {
				var v pgObj
				if err := json.Unmarshal(kv.Value, &v); err != nil {
					panic(err)
				}
				maps[i][string(kv.Key[len(prefix):])] = v
			}
		})
	}
	wg.Wait()
	n := 0
	for _, m := range maps {
		n += len(m)
	}
	return n
}
