package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// childArgs is what the parent asks one child process to measure.
type childArgs struct {
	Impl     string `json:"impl"`
	NS       string `json:"ns"`
	Resource string `json:"resource"`
	Objects  int    `json:"objects"`
	Workers  int    `json:"workers"` // 0: the library's default
	// Candidate, if set, makes the child a fail-over candidate instead of
	// a measurement: see runCandidate.
	Candidate *candidateArgs `json:"candidate,omitempty"`
	Rate      float64        `json:"rate"`   // steady writes per second
	Steady    time.Duration  `json:"steady"` // how long the steady phase writes
	Timeout   time.Duration  `json:"timeout"`
}

// result is one run's measurements, which the child prints as JSON.
type result struct {
	Impl     string `json:"impl"`
	Resource string `json:"resource"`
	Objects  int    `json:"objects"`
	Workers  int    `json:"workers"`
	// SyncSeconds: from building the controller to its cache synced.
	SyncSeconds float64 `json:"sync_s"`
	// OnceSeconds: from building the controller to every object
	// reconciled once (its annotation written).
	OnceSeconds float64 `json:"once_s"`
	// OnceCPUPerObject: the process's CPU time (user and system) from
	// building the controller to every object reconciled once, per
	// object, in microseconds.
	OnceCPUPerObject float64 `json:"once_cpu_per_object_us"`
	// HeapPerObject: heap after GC with the controller running and every
	// object reconciled, minus the heap after GC before it was built,
	// divided by the objects.
	HeapPerObject float64 `json:"heap_per_object_b"`
	// OnceRequests, SteadyRequests: the requests of the resource the server
	// counted (apiserver_request_total) during each phase, the steady
	// writer's own left out, per reconcile write.
	OnceRequests   float64 `json:"once_requests_per_reconcile"`
	SteadyRequests float64 `json:"steady_requests_per_reconcile"`
	// ServerPutMs: the server's own mean time for a PUT of the resource
	// during the sync + reconcile-once phase, in milliseconds.
	ServerPutMs float64 `json:"server_put_ms"`
	// ServerPutShare: the server's time for those PUTs divided by the
	// workers' wall time in that phase (workers × its length): near 1,
	// the workers spend the phase waiting for the server's writes.
	ServerPutShare float64 `json:"server_put_share"`
	// LatencyP50, LatencyP99: from before the writer's PATCH to the end of
	// the reconciler's write of that value, in milliseconds.
	LatencyP50 float64 `json:"latency_p50_ms"`
	LatencyP99 float64 `json:"latency_p99_ms"`
	Samples    int     `json:"samples"`
	// Missed: steady writes whose value was never reconciled (a later
	// write to the same key overtook it, or the run timed out).
	Missed int `json:"missed"`
}

// runChild measures one implementation on the objects the parent created
// in a.NS: build and start the controller, wait for each object to be
// reconciled once, read the heap, then write at a.Rate for a.Steady and
// time each write to its reconcile.
func runChild(ctx context.Context, cfg *rest.Config, a childArgs) (result, error) {
	res := result{Impl: a.Impl, Resource: a.Resource, Objects: a.Objects, Workers: a.Workers}
	run, err := runnerOf(a.Impl, a.Resource)
	if err != nil {
		return res, err
	}
	gvr, err := resourceGVR(a.Resource)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	metrics, err := newScraper(cfg)
	if err != nil {
		return res, err
	}
	tr := newTracker(a.Objects)
	before, err := metrics.requests(ctx, gvr.Resource)
	if err != nil {
		return res, err
	}
	heap0 := heapAfterGC()

	cpu0 := cpuTime()
	t0 := time.Now()
	stop, err := run(ctx, cfg, runSpec{ns: a.NS, resource: a.Resource, workers: a.Workers, done: tr.done})
	if err != nil {
		return res, err
	}
	defer stop()
	res.SyncSeconds = time.Since(t0).Seconds()
	select {
	case <-tr.allOnce:
	case <-ctx.Done():
		return res, fmt.Errorf("%s: %d of %d objects reconciled once before the timeout", a.Impl, tr.onceCount(), a.Objects)
	}
	res.OnceSeconds = time.Since(t0).Seconds()
	res.OnceCPUPerObject = float64(cpuTime()-cpu0) / float64(time.Microsecond) / float64(a.Objects)
	res.HeapPerObject = float64(int64(heapAfterGC())-int64(heap0)) / float64(a.Objects)
	if err := writeHeapProfile(a); err != nil {
		return res, err
	}
	afterOnce, err := metrics.requests(ctx, gvr.Resource)
	if err != nil {
		return res, err
	}
	res.OnceRequests = float64(afterOnce.total()-before.total()) / float64(a.Objects)
	if puts := afterOnce.puts - before.puts; puts > 0 {
		server := afterOnce.putSeconds - before.putSeconds
		res.ServerPutMs = server * 1000 / float64(puts)
		res.ServerPutShare = server / (float64(max(a.Workers, 1)) * res.OnceSeconds)
	}

	if a.Steady > 0 {
		writes, err := steadyWrites(ctx, cfg, a, tr)
		if err != nil {
			return res, err
		}
		afterSteady, err := metrics.requests(ctx, gvr.Resource)
		if err != nil {
			return res, err
		}
		lat, missed := tr.latencies()
		res.Samples, res.Missed = len(lat), missed
		res.LatencyP50, res.LatencyP99 = percentile(lat, 0.50), percentile(lat, 0.99)
		if len(lat) > 0 {
			res.SteadyRequests = float64(afterSteady.total()-afterOnce.total()-writes) / float64(len(lat))
		}
	}
	return res, nil
}

// steadyWrites patches the value of one object after another, at
// a.Rate per second, for a.Steady, then waits (up to 10 s) for the
// reconciles of the values written. It returns how many writes it made.
func steadyWrites(ctx context.Context, cfg *rest.Config, a childArgs, tr *tracker) (int64, error) {
	dc, err := dynamic.NewForConfig(noRateLimit(cfg))
	if err != nil {
		return 0, err
	}
	gvr, err := resourceGVR(a.Resource)
	if err != nil {
		return 0, err
	}
	ri := dc.Resource(gvr).Namespace(a.NS)
	n := int(a.Rate * a.Steady.Seconds())
	tick := time.NewTicker(time.Duration(float64(time.Second) / a.Rate))
	defer tick.Stop()
	var writes int64
	for i := range n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return writes, ctx.Err()
		}
		key, value := objectName(i%a.Objects), "s"+strconv.Itoa(i)
		tr.wrote(key, value)
		writes++
		if err := patchValue(ctx, ri, a.Resource, key, value); err != nil {
			return writes, fmt.Errorf("steady write %s: %w", key, err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr.waitPending(wait)
	return writes, nil
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// tracker records which objects were reconciled once and times each
// steady write to the reconcile that wrote its value.
type tracker struct {
	mu      sync.Mutex
	objects int
	once    map[string]bool
	allOnce chan struct{}
	pending map[string]time.Time // key + "=" + value → when it was written
	lat     []float64
	changed chan struct{}
}

func newTracker(objects int) *tracker {
	return &tracker{objects: objects, once: map[string]bool{}, allOnce: make(chan struct{}),
		pending: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) done(key, value string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.once[key] {
		t.once[key] = true
		if len(t.once) == t.objects {
			close(t.allOnce)
		}
	}
	if at, ok := t.pending[key+"="+value]; ok {
		delete(t.pending, key+"="+value)
		t.lat = append(t.lat, float64(now.Sub(at))/float64(time.Millisecond))
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

func (t *tracker) onceCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.once)
}

func (t *tracker) wrote(key, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[key+"="+value] = time.Now()
}

func (t *tracker) waitPending(ctx context.Context) {
	for {
		t.mu.Lock()
		n := len(t.pending)
		t.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return
		}
	}
}

func (t *tracker) latencies() ([]float64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lat), len(t.pending)
}

// percentile returns the q-quantile of xs (nearest rank), 0 for none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
