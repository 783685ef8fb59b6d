package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// kindCounts counts one kind's store traffic in the control plane: the
// writes that committed, by verb, the writes refused by a conflict, the
// events its watches delivered (to the controllers' informers, and on the
// wire to the agents and the CLI) and the watches open now.
type kindCounts struct {
	creates, updates, deletes, conflicts atomic.Int64
	watchEvents, watches                 atomic.Int64
}

// KindCounts are a kind's figures as /stats serves them.
type KindCounts struct {
	Creates     int64 `json:"creates"`
	Updates     int64 `json:"updates"`
	Deletes     int64 `json:"deletes"`
	Conflicts   int64 `json:"conflicts"`
	WatchEvents int64 `json:"watchEvents"`
	Watches     int64 `json:"watches"`
}

// Writes is how many writes committed.
func (k KindCounts) Writes() int64 { return k.Creates + k.Updates + k.Deletes }

// minus returns k's counters less earlier's; Watches stays k's.
func (k KindCounts) minus(earlier KindCounts) KindCounts {
	return KindCounts{Creates: k.Creates - earlier.Creates, Updates: k.Updates - earlier.Updates,
		Deletes: k.Deletes - earlier.Deletes, Conflicts: k.Conflicts - earlier.Conflicts,
		WatchEvents: k.WatchEvents - earlier.WatchEvents, Watches: k.Watches}
}

func (c *kindCounts) snapshot() KindCounts {
	return KindCounts{Creates: c.creates.Load(), Updates: c.updates.Load(), Deletes: c.deletes.Load(),
		Conflicts: c.conflicts.Load(), WatchEvents: c.watchEvents.Load(), Watches: c.watches.Load()}
}

// wrote counts a write that returned rev and err under verb.
func (c *kindCounts) wrote(verb *atomic.Int64, rev informer.Revision, err error) {
	switch {
	case err == nil && rev > 0:
		verb.Add(1)
	case errors.Is(err, informer.ErrConflict):
		c.conflicts.Add(1)
	}
}

// countedStore is a store that counts its traffic in c. It sits under the
// API server's admission, so that it sees what the controllers write
// directly and what the agents and the CLI write through the API alike.
type countedStore[V any] struct {
	informer.Store[string, V]
	c *kindCounts
}

func (s countedStore[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	rev, err := s.Store.Create(ctx, key, v)
	s.c.wrote(&s.c.creates, rev, err)
	return rev, err
}

func (s countedStore[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	out, err := s.Store.Update(ctx, key, v, rev)
	s.c.wrote(&s.c.updates, out, err)
	return out, err
}

func (s countedStore[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	out, err := s.Store.Delete(ctx, key, rev)
	s.c.wrote(&s.c.deletes, out, err)
	return out, err
}

func (s countedStore[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	s.c.watches.Add(1)
	defer s.c.watches.Add(-1)
	if ctx.Value(countedOnTheWire{}) != nil {
		return s.Store.Watch(ctx, after, emit)
	}
	return s.Store.Watch(ctx, after, func(ev informer.Event[string, V]) error {
		if ev.Type != informer.Bookmark {
			s.c.watchEvents.Add(1)
		}
		return emit(ev)
	})
}

// countedOnTheWire marks the context of a store protocol watch, whose
// events are counted as the API sends them (countWatches): the API server
// leaves out what the watcher's selector does not select, so that what
// the store hands the watch is not what the watcher gets.
type countedOnTheWire struct{}

// countWatches returns h with the events of every store protocol watch
// (/store/<kind>/watch) counted in the kind's counters as they are sent.
func (sc storeCounts) countWatches(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, isStore := strings.CutPrefix(r.URL.Path, "/store/")
		kind, isWatch := strings.CutSuffix(kind, "/watch")
		if isStore && isWatch && sc[kind] != nil {
			r = r.WithContext(context.WithValue(r.Context(), countedOnTheWire{}, true))
			w = &countingWriter{ResponseWriter: w, c: sc[kind]}
		}
		h.ServeHTTP(w, r)
	})
}

// countingWriter counts the PUT and DELETE lines of a watch stream, which
// the server writes a line a Write.
type countingWriter struct {
	http.ResponseWriter
	c *kindCounts
}

func (w *countingWriter) Write(b []byte) (int, error) {
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte(`{"type":"PUT"`)) || bytes.HasPrefix(line, []byte(`{"type":"DELETE"`)) {
			w.c.watchEvents.Add(1)
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the stream and set its
// deadlines.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// storeCounts are the counters of every kind, by the kind's plural name.
type storeCounts map[string]*kindCounts

// measuredKinds are the kinds measure reports, in its table's order.
var measuredKinds = []string{"deployments", "replicasets", "pods", "nodes", "leases", "events"}

// wrap returns st with each kind counted.
func (sc storeCounts) wrap(st api.Stores) api.Stores {
	for _, k := range measuredKinds {
		sc[k] = &kindCounts{}
	}
	return api.Stores{
		Deployments: countedStore[api.Deployment]{st.Deployments, sc["deployments"]},
		ReplicaSets: countedStore[api.ReplicaSet]{st.ReplicaSets, sc["replicasets"]},
		Pods:        countedStore[api.Pod]{st.Pods, sc["pods"]},
		Nodes:       countedStore[api.Node]{st.Nodes, sc["nodes"]},
		Leases:      countedStore[api.Lease]{st.Leases, sc["leases"]},
		Events:      countedStore[events.Event]{st.Events, sc["events"]},
	}
}

// ProcessStats are a process's memory and goroutines.
type ProcessStats struct {
	// RSS and PeakRSS are the resident set now and its high-water mark
	// (VmRSS, VmHWM of /proc/self/status); 0 where there is no /proc.
	RSS     int64 `json:"rssBytes"`
	PeakRSS int64 `json:"peakRssBytes"`
	// LiveHeap is the heap the last GC left live (a GC runs just before
	// it is read); GoMemory all the memory the Go runtime has mapped.
	LiveHeap   int64 `json:"liveHeapBytes"`
	GoMemory   int64 `json:"goMemoryBytes"`
	Goroutines int   `json:"goroutines"`
	// CPU is the user and system CPU time the process has used.
	CPU time.Duration `json:"cpuNanos"`
}

// controlPlaneStats is what the measured control plane's /stats serves.
type controlPlaneStats struct {
	Process ProcessStats          `json:"process"`
	Kinds   map[string]KindCounts `json:"kinds"`
}

// readProcessStats collects the calling process's figures, after a GC so
// that the live heap is the live heap.
func readProcessStats() ProcessStats {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(samples)
	ps := ProcessStats{Goroutines: runtime.NumGoroutine()}
	for i, dst := range []*int64{&ps.LiveHeap, &ps.GoMemory} {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			*dst = int64(samples[i].Value.Uint64())
		}
	}
	ps.RSS, ps.PeakRSS = procStatusKB("VmRSS")*1024, procStatusKB("VmHWM")*1024
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		ps.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return ps
}

// procStatusKB returns a "kB" field of /proc/self/status, 0 if absent.
func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return n
	}
	return 0
}

// measuredControlPlane runs `cluster up` on the embedded store with every
// kind counted, and serves the counts and the process's figures as JSON
// on GET /stats of a second listener, beside /debug/pprof/ (to profile a
// run: go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10). It
// prints the API's URL, then the stats URL, a line each, on stdout:
// measure reads them. It runs until ctx is done.
func measuredControlPlane(ctx context.Context, timings string, stdout, stderr io.Writer) error {
	counts := storeCounts{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st := controlPlaneStats{Process: readProcessStats(), Kinds: map[string]KindCounts{}}
		for k, c := range counts {
			st.Kinds[k] = c.snapshot()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	statsDone := make(chan error, 1)
	sctx, stopStats := context.WithCancel(ctx)
	defer func() { stopStats(); <-statsDone }()
	go func() { statsDone <- serve(sctx, ln, mux) }()
	return up(ctx, upConfig{store: "mem", timings: timings, listen: "127.0.0.1:0", managerAddr: "off", logLevel: "error",
		wrap: counts.wrap, wrapAPI: counts.countWatches,
		onListen: func(url string) {
			fmt.Fprintf(stdout, "%s\nhttp://%s/stats\n", url, ln.Addr())
		}}, io.Discard, stderr)
}
