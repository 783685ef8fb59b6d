package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/converge-go/converge/bench
cpu: AMD EPYC
BenchmarkAddAfter/converge-2         	       1	       960.8 addafter-ns	        59.14 max-late-ms	         4.934 p50-late-ms	        0.85 p99-late-ms
BenchmarkAddAfter/client-go-2        	       1	      1714 addafter-ns	       513.7 max-late-ms	       212.7 p50-late-ms	       439.4 p99-late-ms
BenchmarkThroughput/converge-2       	       1	   2617253 items/s
BenchmarkThroughput/client-go-2      	       1	   1509392 items/s
BenchmarkThroughput/priorityqueue-2  	       1	    412185 items/s
BenchmarkThroughput/converge/metrics-2         	       1	   2191634 items/s
BenchmarkThroughput/client-go/metrics-2        	       1	    557124 items/s
BenchmarkRoundTrip/converge-2                  	       1	        70.40 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/client-go-2                 	       1	       145.8 ns/op	      16 B/op	       1 allocs/op
BenchmarkRoundTrip/priorityqueue-2             	       1	      1230 ns/op	     223 B/op	       6 allocs/op
BenchmarkMemory/converge-2
    queue_bench_test.go:42: some log line
BenchmarkMemory/converge-2                     	       1	        60.15 B/key
BenchmarkMemory/client-go-2                    	       1	        73.63 B/key
BenchmarkThroughput/converge-2       	       1	   2000000 items/s
BenchmarkThroughput/client-go-2      	       1	   1000000 items/s
BenchmarkThroughput/priorityqueue-2  	       1	    400000 items/s
BenchmarkThroughput/converge-2       	       1	   2400000 items/s
BenchmarkThroughput/client-go-2      	       1	   1100000 items/s
BenchmarkThroughput/priorityqueue-2  	       1	    300000 items/s
--- FAIL: BenchmarkStorm/priorityqueue-2
BenchmarkStorm/converge-2                      	       1	        45.97 max-gap-ms	     42992 storm-gets	       100.9 storm-ms
PASS
ok  	github.com/converge-go/converge/bench	29.243s
`

func TestParse(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	assert.Equal(t, "AMD EPYC", res.Header["cpu"])
	assert.Equal(t, "linux", res.Header["goos"])
	assert.Equal(t, 2, res.Procs)
	assert.Equal(t, 3, res.Runs())

	assert.Equal(t, []float64{2617253, 2000000, 2400000}, res.Samples["Throughput"]["items/s"][converge])
	assert.Equal(t, 2400000.0, res.Value(Key{"Throughput", "items/s"}, converge))
	assert.Equal(t, 1100000.0, res.Value(Key{"Throughput", "items/s"}, clientGo))
	assert.Equal(t, 400000.0, res.Value(Key{"Throughput", "items/s"}, priorityQueue))
	assert.Equal(t, 557124.0, res.Value(Key{"Throughput/metrics", "items/s"}, clientGo))
	assert.True(t, math.IsNaN(res.Value(Key{"Throughput/metrics", "items/s"}, priorityQueue)))
	assert.Equal(t, 0.0, res.Value(Key{"RoundTrip", "allocs/op"}, converge))
	assert.Equal(t, 145.8, res.Value(Key{"RoundTrip", "ns/op"}, clientGo))
	assert.Equal(t, []float64{60.15}, res.Samples["Memory"]["B/key"][converge], "the bare name line before a log is skipped")
	assert.Equal(t, 42992.0, res.Value(Key{"Storm", "storm-gets"}, converge))

	// Rows follow the scenario numbering, metrics in printed order.
	rows := res.Rows()
	require.NotEmpty(t, rows)
	assert.Equal(t, Key{"Throughput", "items/s"}, rows[0])
	assert.Equal(t, Key{"Throughput/metrics", "items/s"}, rows[1])
	assert.Equal(t, Key{"Storm", "storm-ms"}, rows[len(rows)-1])
	assert.Equal(t, Key{"AddAfter", "addafter-ns"}, rows[len(rows)-7])
}

func TestSplitName(t *testing.T) {
	for _, c := range []struct {
		in, scenario, impl string
		procs              int
		ok                 bool
	}{
		{"BenchmarkThroughput/client-go/metrics-2", "Throughput/metrics", "client-go", 2, true},
		{"BenchmarkThroughput/client-go-16", "Throughput", "client-go", 16, true},
		{"BenchmarkThroughput/client-go", "Throughput", "client-go", 0, true}, // GOMAXPROCS=1
		{"BenchmarkRoundTrip/priorityqueue-2", "RoundTrip", "priorityqueue", 2, true},
		{"BenchmarkLonely-2", "Lonely", "converge", 2, true},
		{"BenchmarkUpdate/helper/memstore/1writers-2", "Update/helper/memstore/1writers", "converge", 2, true},
		{"BenchmarkPgstoreWriteToInformer/local-2", "PgstoreWriteToInformer/local", "converge", 2, true},
		{"Benchmark", "", "", 0, false},
		{"Throughput/x", "", "", 0, false},
	} {
		s, i, p, ok := splitName(c.in)
		assert.Equal(t, c.ok, ok, c.in)
		if ok {
			assert.Equal(t, []any{c.scenario, c.impl, c.procs}, []any{s, i, p}, c.in)
		}
	}
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	assert.True(t, math.IsNaN(Median(nil)))
	in := []float64{3, 1, 2}
	Median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "Median must not reorder its input")
}

func TestTable(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	table, met, total := res.Table()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Len(t, lines, 2+len(res.Order))

	row := func(prefix, metric string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+prefix) && strings.Contains(l, "| "+metric+" |") {
				return l
			}
		}
		t.Fatalf("no row %q %q in\n%s", prefix, metric, table)
		return ""
	}
	// 2.4M vs 1.1M and 0.4M: ≥ 2x client-go holds, ≥ 10x the priority queue does not.
	assert.Equal(t, "| 1. throughput, 8 producers / 8 workers, 1M keys | items/s | 2400000 | 1100000 | 400000 | 2.18x | 6.00x | ≥ 2x client-go in every rep, ≥ 10x priorityqueue | no | [1.73..2.18] of 3 | none (queue alone) |",
		row("1. throughput, 8 producers / 8 workers, 1M keys |", "items/s"))
	assert.Contains(t, row("1. throughput, 8 producers / 8 workers, 1M keys, metrics on", "items/s"), "| 3.93x | — | ≥ 3x client-go, ≥ 2x in every rep | yes |")
	assert.Contains(t, row("2.", "ns/op"), "| 70.40 | 145.8 | 1230 | 0.48x | 0.057x | ≤ 0.7x client-go | yes |")
	assert.Contains(t, row("2.", "allocs/op"), "| = 0 | yes |")
	assert.Contains(t, row("2.", "B/op"), "|  |  |", "no target")
	assert.Contains(t, row("3.", "B/key"), "| 60.15 | 73.63 | — | 0.82x | — | ≤ 1x client-go | yes |")
	assert.Contains(t, row("4.", "p99-late-ms"), "| 0.85 | 439.4 | — |")
	assert.Contains(t, row("4.", "p99-late-ms"), "| ≤ 1 ms | yes |")
	assert.Contains(t, row("4.", "addafter-ns"), "| ≤ 0.25x client-go | no |")
	assert.Contains(t, row("6.", "storm-gets"), "| yes |")
	assert.Equal(t, 8, total, "every target but Steady's has a row in the sample")
	assert.Equal(t, 6, met)
}

func TestTargetUnknown(t *testing.T) {
	res, err := Parse(strings.NewReader("BenchmarkSteady/converge-2 1 3.0 p99-µs\n"))
	require.NoError(t, err)
	_, known := Targets[Key{"Steady", "p99-µs"}].Met(res, Key{"Steady", "p99-µs"})
	assert.False(t, known, "client-go missing: the ratio is unknown")
	table, met, total := res.Table()
	assert.Contains(t, table, "| n/a |")
	assert.Equal(t, 0, met)
	assert.Equal(t, 1, total)
}

const informerSample = `BenchmarkInformerSync/converge/10k-2      	       1	   2198983 objects/s	         4.550 sync-ms
BenchmarkInformerSync/converge/1M-2       	       1	    531491 objects/s	      1881 sync-ms
BenchmarkInformerSync/client-go/10k-2     	       1	    879929 objects/s	        11.36 sync-ms
BenchmarkInformerSync/client-go/1M-2      	       1	    360733 objects/s	      2772 sync-ms
BenchmarkInformerMemory/converge/10k-2    	       1	       114.1 B/object
BenchmarkInformerMemory/client-go/10k-2   	       1	       124.8 B/object
BenchmarkInformerFanout/converge/10k-2    	       1	     90000 callbacks	   4021061 events/s
BenchmarkInformerFanout/client-go/10k-2   	       1	    100000 callbacks	    704298 events/s
BenchmarkThroughput/converge-2       	       1	   2617253 items/s
`

func TestInformerRows(t *testing.T) {
	res, err := Parse(strings.NewReader(informerSample))
	require.NoError(t, err)
	assert.Equal(t, 531491.0, res.Value(Key{"InformerSync/1M", "objects/s"}, converge))
	assert.Equal(t, 124.8, res.Value(Key{"InformerMemory/10k", "B/object"}, clientGo))

	// Queue scenarios first, then 7-9, each by size in the order 10k, 100k, 1M.
	assert.Equal(t, []Key{
		{"Throughput", "items/s"},
		{"InformerSync/10k", "objects/s"}, {"InformerSync/10k", "sync-ms"},
		{"InformerSync/1M", "objects/s"}, {"InformerSync/1M", "sync-ms"},
		{"InformerMemory/10k", "B/object"},
		{"InformerFanout/10k", "callbacks"}, {"InformerFanout/10k", "events/s"},
	}, res.Rows())

	table, met, total := res.Table()
	assert.Contains(t, table, "| 7. informer initial sync, 10k objects | objects/s | 2198983 | 879929 | — | 2.50x | — | ≥ 2x client-go | yes |")
	assert.Contains(t, table, "| 7. informer initial sync, 1M objects | objects/s | 531491 | 360733 | — | 1.47x | — | ≥ 2x client-go | no |")
	assert.Contains(t, table, "| 7. informer initial sync, 1M objects | sync-ms | 1881 | 2772 | — | 0.68x | — |  |  |")
	assert.Contains(t, table, "| 8. informer heap per cached object, 10k objects | B/object | 114.1 | 124.8 | — | 0.91x | — | ≤ 0.6x client-go | no |")
	assert.Contains(t, table, "| 9. informer fan-out of 100k updates, 10k objects | events/s | 4021061 | 704298 | — | 5.71x | — | ≥ 2x client-go | yes |")
	assert.Contains(t, table, "| 9. informer fan-out of 100k updates, 10k objects | callbacks | 90000 | 100000 | — | 0.90x | — |  |  |")
	assert.Equal(t, 5, total, "Throughput, 2 syncs, 1 memory, 1 fan-out")
	assert.Equal(t, 2, met, "Throughput is n/a (no client-go value), the 1M sync and the memory miss their targets")
}

// Lines of a make bench run (bench/out/bench.txt), whose
// second name parts are no implementation of the table's columns.
const convergeOnlySample = `BenchmarkUpdate/helper/memstore/1writers-2                      	       1	    166982 ns/op	         0 conflicts/op	         0 gaveup/op	    3208 B/op	       8 allocs/op
BenchmarkUpdate/handwritten/memstore/1writers-2                 	       1	     63358 ns/op	         0 conflicts/op	         0 gaveup/op	    3208 B/op	       8 allocs/op
BenchmarkUpdate/helper/memstore/1writers-2                      	       1	    149990 ns/op	         0 conflicts/op	         0 gaveup/op	    3208 B/op	       8 allocs/op
BenchmarkEtcdInitialSync-2	       1	         0 ns/op	      1043 floor-ms	      1180 etcdstore-ms	         1.131 etcdstore/floor
BenchmarkPgstoreInitialSync-2	       1	         0 ns/op	      2100 floor-ms	      2400 pgstore-ms	         1.143 pgstore/floor	      0.8000 pgstore/etcdstore
BenchmarkPgstoreWriteToInformer/local-2         	       1	         0.9640 p50-commit-ms	         3.120 p50-ms	        28.50 p99-commit-ms	        34.60 p99-ms
`

func TestRowsOfBenchmarksNamingNoImplementationAreConvergesAlone(t *testing.T) {
	res, err := Parse(strings.NewReader(convergeOnlySample))
	require.NoError(t, err)
	assert.Equal(t, []float64{166982, 149990}, res.Samples["Update/helper/memstore/1writers"]["ns/op"][converge])
	assert.Equal(t, 63358.0, res.Value(Key{"Update/handwritten/memstore/1writers", "ns/op"}, converge))
	assert.Equal(t, 1180.0, res.Value(Key{"EtcdInitialSync", "etcdstore-ms"}, converge), "a name without a second part is kept")
	for _, k := range res.Order {
		assert.Len(t, res.Samples[k.Scenario][k.Metric], 1, "%v: only converge's column", k)
	}

	table, met, total := res.Table()
	assert.Contains(t, table, "| Update/helper/memstore/1writers | ns/op | 158486 | — | — | — | — |  |  |")
	assert.Contains(t, table, "| 13. initial sync of 100k objects (~550 B): one SELECT + decode (floor), pgstore, etcdstore, alternating | pgstore/floor | 1.14 | — | — | — | — | ≤ 1.3 | yes |")
	assert.Contains(t, table, "| pgstore/etcdstore | 0.8 | — | — | — | — | < 1 (faster than etcd) | yes |")
	assert.Contains(t, table, "writers in the informer's process | p99-ms | 34.60 | — | — | — | — | ≤ 5 ms | no |")
	assert.Contains(t, table, "| etcdstore/floor | 1.13 | — | — | — | — | ≤ 1.1 | no |")
	assert.Equal(t, 4, total)
	assert.Equal(t, 2, met)
}

// Lines of scenario 5 with three repetitions, where converge's median p99.9
// is below client-go's but one repetition is above it.
const perRepSample = `BenchmarkSteady/converge-2 1 50.0 p999-µs 900 max-µs
BenchmarkSteady/client-go-2 1 80.0 p999-µs 1000 max-µs
BenchmarkSteady/converge-2 1 60.0 p999-µs 800 max-µs
BenchmarkSteady/client-go-2 1 90.0 p999-µs 1000 max-µs
BenchmarkSteady/converge-2 1 200 p999-µs 950 max-µs
BenchmarkSteady/client-go-2 1 70.0 p999-µs 1000 max-µs
BenchmarkReconcileLatency/converge-2 1 100 p99-µs
BenchmarkReconcileLatency/client-go-2 1 1000 p99-µs
BenchmarkReconcileLatency/converge-2 1 900 p99-µs
BenchmarkReconcileLatency/client-go-2 1 1000 p99-µs
BenchmarkReconcileLatency/converge-2 1 200 p99-µs
BenchmarkReconcileLatency/client-go-2 1 1000 p99-µs
`

func TestATargetForEveryRepetitionShouldFailOnOneRepetitionThatMissesThoughTheMedianMeetsIt(t *testing.T) {
	res, err := Parse(strings.NewReader(perRepSample))
	require.NoError(t, err)
	table, _, _ := res.Table()
	// p99.9: medians 60 vs 80 (0.75x) but the third pair is 200 vs 70.
	assert.Contains(t, table, "| p999-µs | 60.00 | 80.00 | — | 0.75x | — | ≤ 1x client-go in every rep | no |")
	// max: below client-go's in each pair.
	assert.Contains(t, table, "| max-µs | 900.0 | 1000 | — | 0.90x | — | ≤ 1x client-go in every rep not stalled by the host | yes |")
	// p99 ≤ 0.5x: the median (200 vs 1000) holds and one pair of three
	// misses (900 vs 1000), which the target allows.
	assert.Contains(t, table, "| p99-µs | 200.0 | 1000 | — | 0.20x | — | ≤ 0.5x client-go, and in all reps but one at most | yes |")

	held, stalled, n, ok := Targets[Key{"Steady", "p999-µs"}].checks[0].reps(res.Samples["Steady"]["p999-µs"], nil)
	assert.True(t, ok)
	assert.Equal(t, 2, held)
	assert.Zero(t, stalled, "no stall figures: nothing left out")
	assert.Equal(t, 3, n)
}

func TestRepetitionsThatCannotBePairedShouldLeaveATargetUnknown(t *testing.T) {
	res, err := Parse(strings.NewReader(`BenchmarkSteady/converge-2 1 50.0 p999-µs
BenchmarkSteady/converge-2 1 50.0 p999-µs
BenchmarkSteady/client-go-2 1 80.0 p999-µs
`))
	require.NoError(t, err)
	_, known := Targets[Key{"Steady", "p999-µs"}].Met(res, Key{"Steady", "p999-µs"})
	assert.False(t, known, "two converge repetitions, one client-go: no pairs")
}

func TestEveryRowShouldNameConvergesSourceFromItsScenarioOrElseFromTheStoreItsNameNames(t *testing.T) {
	res, err := Parse(strings.NewReader(convergeOnlySample + reconcileSample))
	require.NoError(t, err)
	table, _, _ := res.Table()
	assert.Contains(t, table, "| Update/helper/memstore/1writers | ns/op | 158486 | — | — | — | — |  |  |  | memstore |")
	assert.Contains(t, table, "| etcdstore/floor | 1.13 | — | — | — | — | ≤ 1.1 | no |  | etcdstore (etcd) |")
	assert.Contains(t, table, "writers in the informer's process | p99-ms | 34.60 | — | — | — | — | ≤ 5 ms | no |  | pgstore (PostgreSQL) |")
	assert.Contains(t, table, "| none (lock: memory) |")
	assert.Equal(t, "", sourceOf("RoundTripSomethingNew"), "a scenario that names no store has no Source")
}

func TestTheRatioOfEachRepetitionShouldBeShownAsARangeBesideTheMedianRatio(t *testing.T) {
	res, err := Parse(strings.NewReader(perRepSample))
	require.NoError(t, err)
	table, _, _ := res.Table()
	// p99: 100/1000, 900/1000, 200/1000.
	assert.Contains(t, table, "| 0.20x | — | ≤ 0.5x client-go, and in all reps but one at most | yes | [0.10..0.90] of 3 | memstore |")
	one, err := Parse(strings.NewReader("BenchmarkSteady/converge-2 1 50.0 p999-µs\nBenchmarkSteady/client-go-2 1 80.0 p999-µs\n"))
	require.NoError(t, err)
	assert.Empty(t, one.repRange(Key{"Steady", "p999-µs"}, clientGo), "one repetition: no range")
}

func TestARepetitionThatMissesWhileTheHostStalledTheProcessAsLongShouldBeLeftOutAndSaidSo(t *testing.T) {
	// The third pair's max misses (1200 vs 1000 µs), and its stall-max-µs
	// is 1300: the host held the writer off the CPU longer than the worst
	// key waited.
	const maxima = `BenchmarkSteady/converge-2 1 900 max-µs 10.0 stall-max-µs
BenchmarkSteady/client-go-2 1 1000 max-µs
BenchmarkSteady/converge-2 1 800 max-µs 10.0 stall-max-µs
BenchmarkSteady/client-go-2 1 1000 max-µs
BenchmarkSteady/converge-2 1 1200 max-µs %s stall-max-µs
BenchmarkSteady/client-go-2 1 1000 max-µs
`
	res, err := Parse(strings.NewReader(fmt.Sprintf(maxima, "1300")))
	require.NoError(t, err)
	table, _, _ := res.Table()
	assert.Contains(t, table, "| max-µs | 900.0 | 1000 | — | 0.90x | — | ≤ 1x client-go in every rep not stalled by the host | yes (1 rep(s) left out: the host stalled the process at least as long) |")

	short, err := Parse(strings.NewReader(fmt.Sprintf(maxima, "1100")))
	require.NoError(t, err)
	table, _, _ = short.Table()
	assert.Contains(t, table, "| ≤ 1x client-go in every rep not stalled by the host | no |", "a stall shorter than the tail explains nothing")
}
