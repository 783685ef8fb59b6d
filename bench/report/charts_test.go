package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chartRun is go test output with two runs of the queue throughput (medians
// 2M, 1M and 0.2M items/s), a round trip without the priority queue, steady
// and controller latencies (the controller's third pipeline is
// controller-runtime's controller), and three fail-over rows, one without
// client-go. It has no informer rows and no AddAfter.
const chartRun = `goos: linux
goarch: amd64
pkg: github.com/converge-go/converge/bench
cpu: Test CPU
BenchmarkThroughput/converge-2         1   1800000 items/s
BenchmarkThroughput/client-go-2        1   1000000 items/s
BenchmarkThroughput/priorityqueue-2    1    200000 items/s
BenchmarkThroughput/converge-2         1   2200000 items/s
BenchmarkRoundTrip/converge-2          1       100 ns/op
BenchmarkRoundTrip/client-go-2         1       250 ns/op
BenchmarkSteady/converge-2             1   50000 adds/s   1.0 p50-µs   20 p99-µs   100 p999-µs
BenchmarkSteady/client-go-2            1   50000 adds/s   2.0 p50-µs   30 p99-µs   200 p999-µs
BenchmarkSteady/priorityqueue-2        1   50000 adds/s   4000 p50-µs   5000 p99-µs   8000 p999-µs
BenchmarkReconcileLatency/converge-2            1   6 p50-µs   4000 p99-µs   7000 p999-µs
BenchmarkReconcileLatency/client-go-2           1   9 p50-µs   3000 p99-µs   4000 p999-µs
BenchmarkReconcileLatency/controller-runtime-2  1   20 p50-µs   6000 p99-µs   12000 p999-µs
BenchmarkLeaderFailover/converge/memory/crash/short-2     1   2000 ms/failover
BenchmarkLeaderFailover/client-go/memory/crash/short-2    1   1500 ms/failover
BenchmarkLeaderFailover/converge/memory/release/default-2 1    500 ms/failover
BenchmarkLeaderFailover/client-go/memory/release/default-2 1  1100 ms/failover
BenchmarkLeaderFailover/converge/etcd/kill/default-2      1  14000 ms/failover
PASS
`

func parseChartRun(t *testing.T) *Results {
	t.Helper()
	res, err := Parse(strings.NewReader(chartRun))
	require.NoError(t, err)
	return res
}

func TestTheThroughputChartShouldShowConvergeAsAMultipleOfEachOtherImplementationPerScenarioRun(t *testing.T) {
	bc, ok := throughputChart(parseChartRun(t))
	require.True(t, ok)
	assert.Equal(t, []string{"queue\n8P/8W", "queue\nround trip"}, bc.Groups, "only the scenarios the run has, in order")
	assert.Equal(t, []string{"converge ÷ client-go", "converge ÷ controller-runtime"}, bc.Series)
	require.Len(t, bc.Values, 2)
	assert.InDelta(t, 2.0, bc.Values[0][0], 1e-9, "median 2M ÷ 1M")
	assert.InDelta(t, 2.5, bc.Values[0][1], 1e-9, "a time is inverted: 250 ns ÷ 100 ns, above 1 when converge is faster")
	assert.InDelta(t, 10.0, bc.Values[1][0], 1e-9, "2M ÷ the priority queue's 0.2M")
	assert.True(t, math.IsNaN(bc.Values[1][1]), "no priority queue round trip: no bar")
	assert.Equal(t, 1.0, bc.Ref, "a line at 1x")
}

func TestTheLatencyChartsShouldHaveAPanelPerScenarioRunWithEachImplementationsQuantiles(t *testing.T) {
	panels := latencyCharts(parseChartRun(t))
	require.Len(t, panels, 2, "Steady and ReconcileLatency; the run has no AddAfter")
	steady, ctrl := panels[0], panels[1]
	assert.Contains(t, steady.Title, "steady 50k adds/s")
	assert.Equal(t, []string{"p50", "p99", "p99.9"}, steady.Groups)
	assert.Equal(t, []string{"converge", "client-go", "controller-runtime"}, steady.Series,
		"the priority queue is controller-runtime's")
	assert.Equal(t, [][]float64{{1, 20, 100}, {2, 30, 200}, {4000, 5000, 8000}}, steady.Values)
	assert.Contains(t, ctrl.Title, "store write → reconcile")
	assert.Equal(t, [][]float64{{6, 4000, 7000}, {9, 3000, 4000}, {20, 6000, 12000}}, ctrl.Values)
	assert.Equal(t, "4ms", ctrl.Format(4000), "labels in the metrics' unit, µs")
}

func TestTheFailoverChartShouldHaveAGroupPerBackendFaultAndLeaseRunInSeconds(t *testing.T) {
	bc, ok := failoverChart(parseChartRun(t))
	require.True(t, ok)
	assert.Equal(t, []string{"memory\ncrash\n2s lease", "memory\nrelease\n15s lease", "etcd\nkill\n15s lease"}, bc.Groups,
		"in the table's scenario order")
	assert.Equal(t, []string{"converge", "client-go"}, bc.Series)
	assert.Equal(t, []float64{2, 0.5, 14}, bc.Values[0])
	assert.Equal(t, []float64{1.5, 1.1}, bc.Values[1][:2])
	assert.True(t, math.IsNaN(bc.Values[1][2]), "no client-go on etcd: no bar")
}

func TestWriteChartsShouldWriteWellFormedSVGsNamingEverySeriesAndDrawingABarPerValue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	paths, err := writeCharts(parseChartRun(t), dir)
	require.NoError(t, err)
	require.Equal(t, []string{
		filepath.Join(dir, "bench-throughput.svg"),
		filepath.Join(dir, "bench-latency.svg"),
		filepath.Join(dir, "bench-failover.svg"),
	}, paths)

	for _, c := range []struct {
		file   string
		texts  []string
		fills  map[string]string // bars plus one legend thumbnail each
		panels int
	}{
		{"bench-throughput.svg", []string{"Throughput: converge ÷ the other (above 1: converge is faster)", "converge ÷ client-go", "converge ÷ controller-runtime",
			"queue", "8P/8W", "round trip", "2x", "2.5x", "10x", "1x"},
			map[string]string{"converge ÷ client-go": "#F08A24", "converge ÷ controller-runtime": "#3A9A48"}, 1},
		{"bench-latency.svg", []string{"converge", "client-go", "controller-runtime", "p50", "p99", "p99.9", "1µs", "20µs", "4ms", "12ms"},
			map[string]string{"converge": "#1F6FB4", "client-go": "#F08A24", "controller-runtime": "#3A9A48"}, 2},
		{"bench-failover.svg", []string{"Leader fail-over: from the leader's fault until another leader acts (lower is better)", "converge", "client-go", "memory", "crash", "2s lease", "etcd", "14s", "500ms"},
			map[string]string{"converge": "#1F6FB4", "client-go": "#F08A24"}, 1},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c.file))
			require.NoError(t, err)
			root, texts, fills := readSVG(t, data)
			assert.Equal(t, "svg", root, "the root element")
			for _, want := range c.texts {
				assert.Contains(t, texts, want)
			}
			want := map[string]int{
				// 2 groups: converge ÷ client-go has 2 bars, ÷ controller-runtime 1 (no round trip).
				"converge ÷ client-go": 2, "converge ÷ controller-runtime": 1,
			}
			switch c.file {
			case "bench-latency.svg":
				want = map[string]int{"converge": 6, "client-go": 6, "controller-runtime": 6}
			case "bench-failover.svg":
				want = map[string]int{"converge": 3, "client-go": 2}
			}
			for series, n := range want {
				assert.Equal(t, n+c.panels, fills[c.fills[series]], "%s: its bars and its legend thumbnail in each panel", series)
			}
		})
	}
}

// readSVG parses data as XML to its end and returns the root element's
// name, the text of every text element, and how many elements each fill
// colour has.
func readSVG(t *testing.T, data []byte) (root string, texts []string, fills map[string]int) {
	t.Helper()
	fills = map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
			for _, a := range tok.Attr {
				if a.Name.Local == "style" {
					for decl := range strings.SplitSeq(a.Value, ";") {
						if v, ok := strings.CutPrefix(strings.TrimSpace(decl), "fill:"); ok {
							fills[v]++
						}
					}
				}
			}
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(tok)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return root, texts, fills
}

func TestWriteChartsShouldWriteNothingForARunWithoutChartedScenarios(t *testing.T) {
	res, err := Parse(strings.NewReader("BenchmarkMemory/converge-2  1  80 B/key\nBenchmarkMemory/client-go-2  1  70 B/key\n"))
	require.NoError(t, err)
	dir := t.TempDir()
	paths, err := writeCharts(res, dir)
	require.NoError(t, err)
	assert.Empty(t, paths)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestABarChartThatCannotBeDrawnShouldBeAnErrorNamingIt(t *testing.T) {
	for name, bc := range map[string]barChart{
		"no group":          {Title: "t", Series: []string{"a"}, Values: [][]float64{{}}},
		"a row per series":  {Title: "t", Groups: []string{"g"}, Series: []string{"a", "b"}, Values: [][]float64{{1}}},
		"a value per group": {Title: "t", Groups: []string{"g", "h"}, Series: []string{"a"}, Values: [][]float64{{1}}},
		"a positive value":  {Title: "t", Groups: []string{"g"}, Series: []string{"a"}, Values: [][]float64{{math.NaN()}}},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			err := writeSVG(&b, 300, 200, bc)
			assert.ErrorContains(t, err, `chart "t"`)
			assert.Zero(t, b.Len(), "nothing written")
		})
	}
}

func TestBarLabelsShouldHaveAtMostThreeSignificantDigits(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit time.Duration
		want string
	}{
		{0.721, time.Microsecond, "721ns"},
		{20.34, time.Microsecond, "20.3µs"},
		{1490, time.Microsecond, "1.49ms"},
		{227693, time.Microsecond, "228ms"},
		{47.02, time.Millisecond, "47ms"},
		{15.066, time.Second, "15.1s"},
		{1000, time.Second, "1000s"},
	} {
		assert.Equal(t, c.want, formatDuration(c.unit)(c.v), "%v × %v", c.v, c.unit)
	}
	assert.Equal(t, "12x", formatRatio(12.5))
	assert.Equal(t, "2.3x", formatRatio(2.29))
	assert.Equal(t, "0.063x", formatRatio(0.0634))
}

func TestTheValueAxisShouldLabelEachDecadeInItsRange(t *testing.T) {
	var labelled []string
	minor := 0
	for _, tk := range (decades{formatRatio}).Ticks(0.1, 100) {
		if tk.Label != "" {
			labelled = append(labelled, tk.Label)
		} else {
			minor++
			assert.True(t, tk.Value > 0.1 && tk.Value < 100, "minor tick %v in range", tk.Value)
		}
	}
	assert.Equal(t, []string{"0.1x", "1x", "10x", "100x"}, labelled)
	assert.Equal(t, 3*8, minor, "2..9 in each of the three decades")
}
