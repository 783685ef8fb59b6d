package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
)

// BenchmarkDebugPages renders each page of a controller with 100k keys
// ready in its queue, 1k failing keys and a reconcile in progress (the
// target is under 100ms a page):
//
//	go test -p 1 -run xxx -bench BenchmarkDebugPages -benchtime 20x ./reconcile/
func BenchmarkDebugPages(b *testing.B) {
	const queued, failing = 100_000, 1_000
	store := memstore.New[string, int]()
	for i := range failing {
		store.Put(fmt.Sprintf("f-%d", i), 1)
	}
	release := make(chan struct{})
	rec := reconcile.Func[string](func(ctx context.Context, key string) (reconcile.Result, error) {
		switch {
		case strings.HasPrefix(key, "f-"):
			return reconcile.Result{}, errors.New("failing: " + strings.Repeat("x", 200))
		case key == "block":
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return reconcile.Result{}, nil
	})
	inf := informer.New[string, int]("ints", store, informer.WithLogger(quietLogger))
	c, err := reconcile.New("ints", rec, reconcile.For(inf), reconcile.WithWorkers(1), quiet,
		reconcile.WithRateLimiter(backoff.NewPerKey[string](backoff.Exponential{Base: time.Hour, Cap: time.Hour})))
	if err != nil {
		b.Fatal(err)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Logger: quietLogger,
		Debug: reconcile.DebugOptions{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.AddInformer(inf); err != nil {
		b.Fatal(err)
	}
	if err := m.AddController(c); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	waitFor(b, func() bool { return c.Inspect().FailingTotal == failing })
	store.Put("block", 1)
	waitFor(b, func() bool { return c.Inspect().Busy == 1 })
	for i := range queued {
		store.Put(fmt.Sprintf("k-%d", i), 1)
	}
	waitFor(b, func() bool { return c.Inspect().Queue.Len == queued })

	info := c.Inspect()
	b.Logf("queued %d ready, %d failing, %d busy", info.Queue.Len, info.FailingTotal, info.Busy)
	h := m.DebugHandler()
	for _, page := range []string{"/debug/converge/", "/debug/converge/controllers/ints", "/debug/converge/controllers/ints?format=json",
		"/debug/converge/controllers/ints/keys/f-7", "/debug/converge/controllers/ints/keys/k-99999"} {
		b.Run(page, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				start := time.Now()
				code, body := getPageB(h, page)
				worst = max(worst, time.Since(start))
				if code != http.StatusOK {
					b.Fatalf("%s: %d %s", page, code, body)
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}

func getPageB(h http.Handler, path string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	w := &recorderW{header: http.Header{}}
	h.ServeHTTP(w, req)
	return w.code, w.body.String()
}

// recorderW is a minimal ResponseWriter (httptest's would do, but this
// keeps the benchmark's allocations to the page's own).
type recorderW struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (w *recorderW) Header() http.Header { return w.header }
func (w *recorderW) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}
func (w *recorderW) WriteHeader(code int) { w.code = code }

func waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("condition not reached within 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
