package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/converge-go/converge/reconcile"
)

// Queue is the adapter every scenario drives. All three queues under test
// satisfy client-go's rate-limiting interface unchanged, so the scenario code
// is the same for each of them; only the constructor differs.
type Queue = workqueue.TypedRateLimitingInterface[string]

// impl is one queue implementation under test.
type impl struct {
	name string
	// newQueue builds a fresh queue. reg == nil means metrics off; otherwise
	// the queue registers its workqueue_* metrics (label name=name) on reg.
	newQueue func(name string, reg prometheus.Registerer) Queue
}

// impls are run in this order in every scenario. converge_test.go prepends
// the converge queue.
var impls = []impl{
	{name: "client-go", newQueue: newClientGo},
	{name: "priorityqueue", newQueue: newPriorityQueue},
}

// newClientGo is client-go's standard rate-limiting queue, as built by
// controllers. Without a registry it is unnamed, which is how client-go turns
// metrics off (a named queue without a provider would use the global one that
// controller-runtime installs in its init).
func newClientGo(name string, reg prometheus.Registerer) Queue {
	cfg := workqueue.TypedRateLimitingQueueConfig[string]{}
	if reg != nil {
		cfg.Name = name
		cfg.MetricsProvider = newPromProvider(reg)
	}
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](), cfg)
}

// newPriorityQueue is controller-runtime's priority queue. An empty name is
// how it turns metrics off.
func newPriorityQueue(name string, reg prometheus.Registerer) Queue {
	if reg == nil {
		return priorityqueue.New[string]("")
	}
	return priorityqueue.New(name, func(o *priorityqueue.Opts[string]) {
		o.MetricProvider = newPromProvider(reg)
	})
}

// ---- keys ----

const (
	throughputKeys = 1_000_000
	memoryKeys     = 1_000_000
	addAfterKeys   = 1_000_000
)

var (
	keysOnce sync.Once
	allKeys  []string
)

// distinctKeys returns n pre-generated distinct keys shaped like Kubernetes
// namespace/name keys, "namespace-17/object-000117". They are generated once
// per process, before any timing, and stay alive for the whole run, so they
// never count towards a queue's memory. The object number is the key's index.
func distinctKeys(n int) []string {
	keysOnce.Do(func() {
		allKeys = make([]string, throughputKeys)
		for i := range allKeys {
			allKeys[i] = fmt.Sprintf("namespace-%d/object-%06d", i%100, i)
		}
	})
	if n > len(allKeys) {
		panic(fmt.Sprintf("distinctKeys(%d): only %d keys", n, len(allKeys)))
	}
	return allKeys[:n]
}

// keyIndex recovers the index of a key made by distinctKeys. Used only after
// timing, to join records without a map on the hot path.
func keyIndex(k string) int {
	i, err := strconv.Atoi(k[strings.LastIndexByte(k, '-')+1:])
	if err != nil {
		panic(err)
	}
	return i
}

// ---- helpers ----

// triggerReasonsEnv switches the controller's trigger reasons in scenarios
// 11 and 12 (reconcile.WithTriggerReasons) for measuring their cost as
// interleaved on/off rounds: "on" or "off"; unset or anything else keeps
// the controller's default (off outside a Manager with debug pages).
const triggerReasonsEnv = "CONVERGE_BENCH_TRIGGER_REASONS"

// recTriggerOptions is the reconcile option triggerReasonsEnv asks for.
func recTriggerOptions() []reconcile.Option {
	switch os.Getenv(triggerReasonsEnv) {
	case "on":
		return []reconcile.Option{reconcile.WithTriggerReasons()}
	case "off":
		return []reconcile.Option{reconcile.WithoutTriggerReasons()}
	}
	return nil
}

// settle collects garbage left by the previous sub-benchmark so it is not
// charged to the next one.
func settle() {
	runtime.GC()
	runtime.GC()
}

// shutdown stops q and waits for its workers, so no goroutine outlives a
// sub-benchmark.
func shutdown(q Queue, workers *sync.WaitGroup) {
	q.ShutDown()
	workers.Wait()
}

// waitOrTimeout waits for done; it reports false after d.
func waitOrTimeout(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// getRec is one key handed out by Get and when (ns since the scenario's base).
type getRec struct {
	key string
	at  int64
}

// percentile returns the p-th percentile (0..100) of sorted values
// (nearest rank).
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func TestPercentile(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {0, 1}} {
		if got := percentile(v, c.p); got != c.want {
			t.Errorf("percentile(%v) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile(nil) = %d", got)
	}
}

func TestKeys(t *testing.T) {
	keys := distinctKeys(1000)
	if keys[123] != "namespace-23/object-000123" {
		t.Fatalf("key 123 = %q", keys[123])
	}
	for i, k := range keys {
		if keyIndex(k) != i {
			t.Fatalf("keyIndex(%q) = %d, want %d", k, keyIndex(k), i)
		}
	}
	if n := len(slices.Compact(slices.Clone(keys))); n != len(keys) {
		t.Fatalf("keys not distinct")
	}
}

// TestQueues checks every implementation against the contract the scenarios
// rely on: dedup, Get/Done hand-off, AddAfter, drain on shutdown.
func TestQueues(t *testing.T) {
	for _, im := range impls {
		for _, withMetrics := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/metrics=%v", im.name, withMetrics), func(t *testing.T) {
				var reg *prometheus.Registry
				if withMetrics {
					reg = prometheus.NewRegistry()
				}
				q := newQueueFor(im, reg)
				q.Add("a")
				q.Add("a")
				q.AddAfter("b", 5*time.Millisecond)
				got := map[string]int{}
				for range 2 {
					k, shut := q.Get()
					if shut {
						t.Fatal("unexpected shutdown")
					}
					got[k]++
					q.Done(k)
				}
				if got["a"] != 1 || got["b"] != 1 {
					t.Fatalf("got %v", got)
				}
				if withMetrics {
					// Checked before ShutDown: converge unregisters its
					// metrics there.
					mfs, err := reg.Gather()
					if err != nil {
						t.Fatal(err)
					}
					var names []string
					for _, mf := range mfs {
						names = append(names, mf.GetName())
					}
					if !slices.Equal(names, workqueueMetrics) {
						t.Fatalf("%s registers %v, want %v", im.name, names, workqueueMetrics)
					}
				}
				q.ShutDown()
				if _, shut := q.Get(); !shut {
					t.Fatal("Get after ShutDown did not report shutdown")
				}
			})
		}
	}
}

// workqueueMetrics are the metric families every queue must register with
// metrics on (sorted, as Gather returns them), so that the metrics variants
// compare queues doing the same bookkeeping.
var workqueueMetrics = []string{
	"workqueue_adds_total",
	"workqueue_depth",
	"workqueue_longest_running_processor_seconds",
	"workqueue_queue_duration_seconds",
	"workqueue_retries_total",
	"workqueue_unfinished_work_seconds",
	"workqueue_work_duration_seconds",
}

// newQueueFor builds im's queue with metrics on reg (nil: off).
func newQueueFor(im impl, reg *prometheus.Registry) Queue {
	if reg == nil {
		return im.newQueue("bench", nil)
	}
	return im.newQueue("bench", reg)
}
