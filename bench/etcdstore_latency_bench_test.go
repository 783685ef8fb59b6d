package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// BenchmarkEtcdWriteToInformer is BenchmarkPgstoreWriteToInformer over
// etcdstore (the test etcd of scripts/servers.sh): write → informer handler
// latency at a steady 1000 Creates of new keys per second from pgWriters
// writers, open loop (createAt), one client for the writers and the
// informer. One op is one run of 5 s (5000 writes). Run beside pgstore's:
//
//	GOMAXPROCS=2 go -C bench test -run '^$' -bench 'WriteToInformer$' -benchtime 1x -count 3 .
func BenchmarkEtcdWriteToInformer(b *testing.B) { etcdWriteToInformer(b, 1000, 5000) }

// BenchmarkEtcdWriteToInformer10k is BenchmarkEtcdWriteToInformer at 10 000
// writes per second asked, 2 s (20 000 writes) per op; writes/s reports what
// the writers reached.
func BenchmarkEtcdWriteToInformer10k(b *testing.B) { etcdWriteToInformer(b, 10_000, 20_000) }

func etcdWriteToInformer(b *testing.B, rate, n int) {
	cli := etcdBenchClient(b)
	var run latencyRun
	for i := range b.N {
		prefix := "/converge-bench/latency/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
		store := must.Do(etcdstore.New[pgObj](cli, prefix))
		rec := recordAdds(b, store)
		run.measure(b, rec, store, fmt.Sprintf("r%d-", i), n, rate)
		b.Cleanup(func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) })
	}
	run.report(b)
}
