package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A latency tail on this machine is the code's or the host's. hostWatch
// records, over one repetition, what the host and the runtime did to the
// process, so that a repetition whose tail jumps can be told apart:
//
//   - runq-wait-ms: the time the process's threads spent runnable but
//     waiting for a CPU (the sum of run_delay in /proc/self/task/*/schedstat):
//     the host's scheduler holding the process back (other processes on the
//     shared cores);
//   - steal-ms: CPU time the hypervisor gave to other guests (/proc/stat);
//   - gc-pause-max-µs: the longest stop-the-world pause of the garbage
//     collector during the repetition, and gcs: how many cycles ran.
//
// Each is reported per repetition beside the latency figures (go test
// -count=5 prints one line per repetition). A tail that moves with
// runq-wait-ms and not with gc-pause-max-µs is the host's.
//
// With BENCH_TRACE_DIR set, a runtime/trace flight recorder runs during
// each repetition, and a repetition whose p99.9 is above
// BENCH_TRACE_P999_US (default 1000) writes the last seconds of its
// execution trace there (go tool trace FILE shows what ran, what waited
// and where the GC was at the stall).
type hostWatch struct {
	runq0, steal0 time.Duration
	gc0           uint32
	fr            *trace.FlightRecorder
	// gaps is the writer's clock (sleepUntil): its longest
	// gap is the longest stall of the writer's thread during the repetition.
	gaps clockGaps
	// worst, set by the benchmark, is logged beside a written trace: which
	// event was slowest and when, from the "base" mark.
	worst string
}

// mark logs msg in the execution trace (when the flight recorder runs),
// so that the benchmark's clock can be found in it.
func (h *hostWatch) mark(msg string) {
	if h.fr != nil {
		trace.Log(context.Background(), "bench", msg)
	}
}

// hostStats is what hostWatch.stop measured.
type hostStats struct {
	runqWait, steal time.Duration
	gcs             uint32
	maxPause        time.Duration
	// stall is the writer's longest gap between two clock reads.
	stall time.Duration
}

func startHostWatch(b *testing.B) *hostWatch {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &hostWatch{runq0: runqWait(), steal0: stealTime(), gc0: ms.NumGC}
	if os.Getenv("BENCH_TRACE_DIR") != "" {
		h.fr = trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 5 * time.Second, MaxBytes: 256 << 20})
		if err := h.fr.Start(); err != nil {
			b.Logf("flight recorder: %v", err)
			h.fr = nil
		}
	}
	return h
}

// stop ends the watch. p999 is the repetition's p99.9 latency: with the
// flight recorder on and p999 above the threshold, the trace is written to
// BENCH_TRACE_DIR.
func (h *hostWatch) stop(b *testing.B, p999 time.Duration) hostStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := hostStats{runqWait: runqWait() - h.runq0, steal: stealTime() - h.steal0, gcs: ms.NumGC - h.gc0, stall: h.gaps.max}
	for i := uint32(0); i < min(s.gcs, uint32(len(ms.PauseNs))); i++ {
		// PauseNs is a ring: the pause of cycle NumGC is at (NumGC+255)%256.
		s.maxPause = max(s.maxPause, time.Duration(ms.PauseNs[(ms.NumGC-i+255)%256]))
	}
	if h.fr == nil {
		return s
	}
	defer h.fr.Stop()
	threshold := 1000 * time.Microsecond
	if v, err := strconv.Atoi(os.Getenv("BENCH_TRACE_P999_US")); err == nil && v > 0 {
		threshold = time.Duration(v) * time.Microsecond
	}
	if p999 <= threshold {
		return s
	}
	var buf bytes.Buffer
	if _, err := h.fr.WriteTo(&buf); err != nil {
		b.Logf("flight recorder: %v", err)
		return s
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name())
	path := filepath.Join(os.Getenv("BENCH_TRACE_DIR"), fmt.Sprintf("%s-%d.trace", name, time.Now().UnixNano()))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Logf("flight recorder: %v", err)
		return s
	}
	b.Logf("p99.9 %v > %v: execution trace of this repetition in %s (runq-wait %v, steal %v, %d GCs, longest pause %v, writer's longest stall %v; %s)",
		p999, threshold, path, s.runqWait, s.steal, s.gcs, s.maxPause, s.stall, h.worst)
	return s
}

// add sums two repetitions' figures (the longest pause of both).
func (s hostStats) add(o hostStats) hostStats {
	return hostStats{runqWait: s.runqWait + o.runqWait, steal: s.steal + o.steal, gcs: s.gcs + o.gcs,
		maxPause: max(s.maxPause, o.maxPause), stall: max(s.stall, o.stall)}
}

// report adds the figures to b's metrics.
func (s hostStats) report(b *testing.B) {
	b.ReportMetric(float64(s.runqWait)/1e6, "runq-wait-ms")
	b.ReportMetric(float64(s.steal)/1e6, "steal-ms")
	b.ReportMetric(float64(s.maxPause)/1e3, "gc-pause-max-µs")
	b.ReportMetric(float64(s.gcs), "gcs")
	b.ReportMetric(float64(s.stall)/1e3, "stall-max-µs")
}

// runqWait is the sum, over the process's threads, of the time they were
// runnable and waiting for a CPU (Linux; 0 elsewhere).
func runqWait() time.Duration {
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join("/proc/self/task", d.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue
		}
		if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			total += time.Duration(ns)
		}
	}
	return total
}

// stealTime is the machine's total steal time (/proc/stat, Linux; 0
// elsewhere), in clock ticks of 10 ms.
func stealTime() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal …
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(fields[8], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
