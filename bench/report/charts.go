package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
)

// The charts make bench draws from the medians, for the README: where
// converge stands against client-go and controller-runtime at a glance.
// Each file is written only when the run has data for it (a run limited
// with -bench, or without the test servers, has fewer rows).

// chartsDir is where make bench writes the charts, relative to the bench
// module: the repository's docs/images, which the README shows.
const chartsDir = "../docs/images"

// chartFile is one SVG file of one or more panels side by side.
type chartFile struct {
	Name          string    // file name in chartsDir
	Width, Height vg.Length // of each panel
	Charts        []barChart
}

// throughputRows are the throughput chart's groups, in order. For a row
// whose metric is a time (lowerIsBetter), the ratio is inverted, so that
// above 1 always means converge is faster.
var throughputRows = []struct {
	scenario, metric, label string
	lowerIsBetter           bool
}{
	{"Throughput", "items/s", "queue\n8P/8W", false},
	{"Throughput/metrics", "items/s", "queue+metrics\n8P/8W", false},
	{"RoundTrip", "ns/op", "queue\nround trip", true},
	{"InformerSync/10k", "objects/s", "informer\nsync 10k", false},
	{"InformerSync/100k", "objects/s", "informer\nsync 100k", false},
	{"InformerSync/1M", "objects/s", "informer\nsync 1M", false},
	{"InformerFanout/10k", "events/s", "informer\nfan-out 10k", false},
	{"InformerFanout/100k", "events/s", "informer\nfan-out 100k", false},
	{"InformerFanout/1M", "events/s", "informer\nfan-out 1M", false},
	{"ReconcileThroughput/workers=1", "objects/s", "controller\n1 worker", false},
	{"ReconcileThroughput/workers=4", "objects/s", "controller\n4 workers", false},
	{"ReconcileThroughput/workers=16", "objects/s", "controller\n16 workers", false},
}

// latencyPanels are the latency chart's panels: three quantiles (or two
// and the maximum) per implementation.
var latencyPanels = []struct {
	scenario, title string
	unit            time.Duration // of the metrics' values
	metrics, labels []string
}{
	{"Steady", "queue: add → get, steady 50k adds/s, 4 workers", time.Microsecond,
		[]string{"p50-µs", "p99-µs", "p999-µs"}, []string{"p50", "p99", "p99.9"}},
	{"ReconcileLatency", "controller: store write → reconcile, 10k writes/s", time.Microsecond,
		[]string{"p50-µs", "p99-µs", "p999-µs"}, []string{"p50", "p99", "p99.9"}},
	{"AddAfter", "queue: lateness of 1M AddAfter (0-100 ms)", time.Millisecond,
		[]string{"p50-late-ms", "p99-late-ms", "max-late-ms"}, []string{"p50", "p99", "max"}},
}

// Display names of the series. controller-runtime's priority queue
// (the queue rows) and its controller (the controller rows) are one
// series: both are controller-runtime's code.
const (
	vsClientGo          = "converge ÷ client-go"
	vsControllerRuntime = "converge ÷ controller-runtime"
)

// third returns the implementation in the table's third column for
// scenario: controller-runtime's controller or its priority queue.
func (res *Results) third(k Key) string {
	if _, ok := res.Samples[k.Scenario][k.Metric][controllerRuntime]; ok {
		return controllerRuntime
	}
	return priorityQueue
}

// throughputChart is converge's throughput as a multiple of each other
// implementation's, per scenario the run has; ok is false if it has none.
func throughputChart(res *Results) (bc barChart, ok bool) {
	bc = barChart{
		Title:  "Throughput: converge ÷ the other (above 1: converge is faster)",
		Series: []string{vsClientGo, vsControllerRuntime},
		Values: [][]float64{nil, nil},
		Format: formatRatio,
		Ref:    1,
	}
	for _, row := range throughputRows {
		k := Key{row.scenario, row.metric}
		conv := res.Value(k, converge)
		cg := ratioOf(conv, res.Value(k, clientGo), row.lowerIsBetter)
		cr := ratioOf(conv, res.Value(k, res.third(k)), row.lowerIsBetter)
		if math.IsNaN(cg) && math.IsNaN(cr) {
			continue
		}
		bc.Groups = append(bc.Groups, row.label)
		bc.Values[0] = append(bc.Values[0], cg)
		bc.Values[1] = append(bc.Values[1], cr)
	}
	return bc, len(bc.Groups) > 0
}

// ratioOf is conv ÷ other, or other ÷ conv when lower is better; NaN when
// either is missing or not positive.
func ratioOf(conv, other float64, lowerIsBetter bool) float64 {
	if !(conv > 0) || !(other > 0) {
		return math.NaN()
	}
	if lowerIsBetter {
		return other / conv
	}
	return conv / other
}

// latencyCharts are the latency panels the run has data for.
func latencyCharts(res *Results) []barChart {
	var out []barChart
	for _, panel := range latencyPanels {
		k := Key{panel.scenario, panel.metrics[0]}
		bc := barChart{
			Title:  panel.title,
			Groups: panel.labels,
			Format: formatDuration(panel.unit),
		}
		for _, impl := range []string{converge, clientGo, res.third(k)} {
			row := make([]float64, len(panel.metrics))
			have := false
			for i, m := range panel.metrics {
				row[i] = res.Value(Key{panel.scenario, m}, impl)
				have = have || row[i] > 0
			}
			if have {
				bc.Series = append(bc.Series, displayName(impl))
				bc.Values = append(bc.Values, row)
			}
		}
		if len(bc.Series) > 0 {
			out = append(out, bc)
		}
	}
	return out
}

// failoverChart is the leader fail-over time per backend, fault and
// timing the run has, for converge and client-go; ok is false if none.
func failoverChart(res *Results) (bc barChart, ok bool) {
	bc = barChart{
		Title:  "Leader fail-over: from the leader's fault until another leader acts (lower is better)",
		Series: []string{converge, clientGo},
		Values: [][]float64{nil, nil},
		Format: formatDuration(time.Second),
	}
	leases := map[string]string{"default": "15s lease", "short": "2s lease"}
	for _, sc := range Scenarios {
		rest, isFailover := strings.CutPrefix(sc.Name, "LeaderFailover/")
		if !isFailover {
			continue
		}
		k := Key{sc.Name, "ms/failover"}
		conv, cg := res.Value(k, converge)/1000, res.Value(k, clientGo)/1000
		if !(conv > 0) && !(cg > 0) {
			continue
		}
		parts := strings.Split(rest, "/") // backend, fault, timing
		if len(parts) != 3 {
			continue
		}
		bc.Groups = append(bc.Groups, parts[0]+"\n"+parts[1]+"\n"+leases[parts[2]])
		bc.Values[0] = append(bc.Values[0], conv)
		bc.Values[1] = append(bc.Values[1], cg)
	}
	return bc, len(bc.Groups) > 0
}

// displayName is an implementation's name on the charts.
func displayName(impl string) string {
	if impl == priorityQueue {
		return controllerRuntime
	}
	return impl
}

// chartFiles are the files the run has data for.
func chartFiles(res *Results) []chartFile {
	var files []chartFile
	if bc, ok := throughputChart(res); ok {
		files = append(files, chartFile{"bench-throughput.svg", vg.Points(max(600, 90+70*float64(len(bc.Groups)))), vg.Points(330), []barChart{bc}})
	}
	if lat := latencyCharts(res); len(lat) > 0 {
		files = append(files, chartFile{"bench-latency.svg", vg.Points(330), vg.Points(300), lat})
	}
	if bc, ok := failoverChart(res); ok {
		files = append(files, chartFile{"bench-failover.svg", vg.Points(max(600, 90+55*float64(len(bc.Groups)))), vg.Points(300), []barChart{bc}})
	}
	return files
}

// writeCharts writes the charts res has data for into dir and returns
// their paths.
func writeCharts(res *Results, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range chartFiles(res) {
		var b bytes.Buffer
		if err := writeSVG(&b, f.Width, f.Height, f.Charts...); err != nil {
			return paths, fmt.Errorf("%s: %w", f.Name, err)
		}
		path := filepath.Join(dir, f.Name)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// formatRatio labels a ratio bar: "12x", "2.3x", "0.063x".
func formatRatio(r float64) string {
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 0, 64) + "x"
	}
	return strconv.FormatFloat(r, 'g', 2, 64) + "x"
}

// formatDuration labels a bar whose value counts units, with three
// significant digits: "20.3µs", "1.49ms", "15.1s".
func formatDuration(unit time.Duration) func(float64) string {
	return func(v float64) string {
		d := time.Duration(v * float64(unit))
		if d >= time.Minute { // "1000s", not "16m40s"
			return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + "s"
		}
		for _, step := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
			if d >= step {
				// Round to a hundredth of the largest unit that fits, at
				// most three significant digits.
				r := step / 100
				if d >= 100*step {
					r = step
				} else if d >= 10*step {
					r = step / 10
				}
				return d.Round(r).String()
			}
		}
		return d.String()
	}
}
