package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// BenchmarkReconcileThroughputEtcd is ReconcileThroughput at 4 workers with
// converge fed through etcdstore: the 100k objects are written to etcd
// once (not timed), and every op lists them from etcd (one Get), decodes
// them (JSON) and reconciles each once. client-go, the anchor, is fed the
// same objects through its in-memory fake ListWatch, as in
// ReconcileThroughput: the ratio includes etcd's Get and the decoding that
// client-go's row does not pay. Skipped unless an etcd is configured:
//
//	scripts/servers.sh start; eval "$(scripts/servers.sh env)"
//	go -C bench test -run '^$' -bench BenchmarkReconcileThroughputEtcd -benchtime 1x -count 3 .
func BenchmarkReconcileThroughputEtcd(b *testing.B) {
	cli := etcdBenchClient(b)
	o := cachedInformerObjects(reconcileObjects)
	prefix := "/converge-bench/reconcile/" + strconv.FormatUint(rand.Uint64(), 36) + "/"
	etcdLoadObjects(b, cli, prefix, o)
	defer func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) }()
	impls := []recImpl{
		{name: "converge", newPipeline: func(o *informerObjects, t *recTracker, _ int) recPipeline {
			return newConvergeEtcdRec(cli, prefix, o, t)
		}},
		{name: "client-go", newPipeline: newClientGoRec},
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.StopTimer()
			var sum recRun
			for range b.N {
				sum.add(recThroughputOnce(b, im, o, 4))
			}
			b.ReportMetric(float64(sum.elapsed.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(b.N*o.n)/sum.elapsed.Seconds(), "objects/s")
			reportStages(b, sum, b.N)
		})
	}
}

// newConvergeEtcdRec is convergeRec over an etcdstore.Store of the objects
// under prefix, decoded by its default JSON codec; a transform gives each
// decoded object its index in o, which JSON does not carry.
func newConvergeEtcdRec(cli *clientv3.Client, prefix string, o *informerObjects, t *recTracker) recPipeline {
	idx := make(map[string]int32, len(o.keys))
	for i, k := range o.keys {
		idx[k] = int32(i)
	}
	return &convergeRec{o: o, t: t, src: must.Do(etcdstore.New[*benchObj](cli, prefix)),
		infOpts: []informer.Option{informer.WithTransform(func(v *benchObj) *benchObj {
			v.idx = idx[v.Namespace+"/"+v.Name]
			return v
		})}}
}

// etcdLoadObjects writes o's objects as JSON under prefix + their keys,
// 100 per transaction.
func etcdLoadObjects(b *testing.B, cli *clientv3.Client, prefix string, o *informerObjects) {
	b.Helper()
	var ops []clientv3.Op
	for i, obj := range o.objs {
		data, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(prefix+o.keys[i], string(data)))
		if len(ops) == 100 || i == len(o.objs)-1 {
			if _, err := cli.Txn(b.Context()).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}
