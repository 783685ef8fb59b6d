package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// httpObj is the value the httpstore scenarios write: its index, so that
// the watcher finds when its write began.
type httpObj struct {
	I    int    `json:"i"`
	Name string `json:"name"`
}

// BenchmarkHTTPStore measures a store served by httpstore against the same
// store used directly, in the same op: write throughput (8 writers, closed
// loop, Creates of distinct keys) and write → watch latency (one writer at a
// steady 1000 Creates/s, one Watch from before the first; latency from just
// before Create to the event's emit, so the HTTP write's round trip is in
// it). The server and client talk over loopback in this process; the client
// keeps 64 idle connections so that the writers reuse theirs. Metrics:
// direct-writes/s, http-writes/s, http/direct-writes (the throughput
// ratio), and p50/p99 latency in µs of each with http/direct-p50.
//
//	go -C bench test -run '^$' -bench 'HTTPStore' -benchtime 1x -count 3 .
//
// The etcd sub-benchmark needs the test etcd (scripts/servers.sh); it is
// skipped without one.
func BenchmarkHTTPStore(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		httpStorePair(b, 20_000, func(string) informer.Store[string, httpObj] { return must.Do(memstore.New[string, httpObj]()) })
	})
	b.Run("etcd", func(b *testing.B) {
		cli := etcdBenchClient(b)
		httpStorePair(b, 4_000, func(name string) informer.Store[string, httpObj] {
			prefix := "/converge-bench/httpstore/" + name + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
			b.Cleanup(func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) })
			return must.Do(etcdstore.New[httpObj](cli, prefix))
		})
	})
}

// httpStorePair runs the direct and the served measure on fresh stores
// from newStore, writes creates each for throughput.
func httpStorePair(b *testing.B, writes int, newStore func(name string) informer.Store[string, httpObj]) {
	var dw, hw, dp50, hp50, dp99, hp99 []float64
	for i := range b.N {
		d := newStore(fmt.Sprintf("direct%d-", i))
		w, p50, p99 := storeLoad(b, d, writes)
		dw, dp50, dp99 = append(dw, w), append(dp50, p50), append(dp99, p99)

		srv := httptest.NewServer(must.Do(httpstore.NewServer(newStore(fmt.Sprintf("http%d-", i)), httpstore.ServerOptions[httpObj]{})))
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c, err := httpstore.NewClient[httpObj](srv.URL, httpstore.ClientOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			b.Fatal(err)
		}
		w, p50, p99 = storeLoad(b, c, writes)
		hw, hp50, hp99 = append(hw, w), append(hp50, p50), append(hp99, p99)
		srv.CloseClientConnections()
		srv.Close()
		tr.CloseIdleConnections()
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(dw), "direct-writes/s")
	b.ReportMetric(median(hw), "http-writes/s")
	b.ReportMetric(median(hw)/median(dw), "http/direct-writes")
	b.ReportMetric(median(dp50), "direct-p50-µs")
	b.ReportMetric(median(hp50), "http-p50-µs")
	b.ReportMetric(median(dp99), "direct-p99-µs")
	b.ReportMetric(median(hp99), "http-p99-µs")
	b.ReportMetric(median(hp50)/median(dp50), "http/direct-p50")
}

// storeLoad measures s: writes/s of n Creates by 8 writers, then the p50
// and p99 (µs) of write → watch latency at 1000 writes/s for 1 s.
func storeLoad(b *testing.B, s informer.Store[string, httpObj], n int) (writesPerSec, p50, p99 float64) {
	ctx := b.Context()
	const writers = 8
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				if _, err := s.Create(ctx, "t"+strconv.Itoa(i), httpObj{I: i, Name: "throughput"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	writesPerSec = float64(n) / time.Since(start).Seconds()

	const m, rate = 1000, 1000
	_, rev, err := s.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	began := make([]atomic.Int64, m)
	lat := make([]int64, 0, m)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(wctx, rev, func(e informer.Event[string, httpObj]) error {
			if e.Type == informer.Put && e.Value.Name == "latency" {
				lat = append(lat, time.Now().UnixNano()-began[e.Value.I].Load())
				if len(lat) == m {
					cancel()
				}
			}
			return nil
		})
	}()
	t0 := time.Now()
	for i := range m {
		if d := time.Until(t0.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d) // the writer's pace, not synchronisation
		}
		began[i].Store(time.Now().UnixNano())
		if _, err := s.Create(ctx, "l"+strconv.Itoa(i), httpObj{I: i, Name: "latency"}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		b.Fatalf("the watch saw %d of %d writes in 30 s", len(lat), m)
	}
	slices.Sort(lat)
	return writesPerSec, float64(percentile(lat, 50)) / 1e3, float64(percentile(lat, 99)) / 1e3
}
