package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Implementations, in table order. The first is the one the ratios are of.
const (
	converge      = "converge"
	clientGo      = "client-go"
	priorityQueue = "priorityqueue"
)

// Results holds everything parsed from `go test -bench` output.
type Results struct {
	// Header holds the "key: value" lines go test prints before the
	// benchmarks (goos, goarch, pkg, cpu).
	Header map[string]string
	// Procs is the GOMAXPROCS suffix of the benchmark names (0 if absent).
	Procs int
	// Samples maps scenario → metric unit → implementation → one value per
	// run, in the order the runs printed them.
	Samples map[string]map[string]map[string][]float64
	// Order lists scenario and metric as first seen.
	Order []Key
}

// Key names one row of the table.
type Key struct{ Scenario, Metric string }

// Parse reads `go test -bench` output. Lines it does not recognise (PASS,
// ok, test logs) are skipped.
func Parse(r io.Reader) (*Results, error) {
	res := &Results{Header: map[string]string{}, Samples: map[string]map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "Benchmark") {
			if k, v, ok := strings.Cut(line, ": "); ok && !strings.ContainsAny(k, " \t") {
				if _, seen := res.Header[k]; !seen {
					res.Header[k] = strings.TrimSpace(v)
				}
			}
			continue
		}
		if err := res.addLine(line); err != nil {
			return nil, err
		}
	}
	return res, sc.Err()
}

// addLine parses one result line:
//
//	BenchmarkThroughput/converge/metrics-2   1   2191634 items/s
func (res *Results) addLine(line string) error {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return nil // a name printed alone before logs, or "--- FAIL"
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return nil
	}
	scenario, impl, procs, ok := splitName(f[0])
	if !ok {
		return nil
	}
	if procs > 0 {
		res.Procs = procs
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return fmt.Errorf("%s: metric %q: %v", f[0], f[i+1], err)
		}
		res.add(scenario, f[i+1], impl, v)
	}
	return nil
}

func (res *Results) add(scenario, metric, impl string, v float64) {
	byMetric := res.Samples[scenario]
	if byMetric == nil {
		byMetric = map[string]map[string][]float64{}
		res.Samples[scenario] = byMetric
	}
	byImpl := byMetric[metric]
	if byImpl == nil {
		byImpl = map[string][]float64{}
		byMetric[metric] = byImpl
		res.Order = append(res.Order, Key{scenario, metric})
	}
	byImpl[impl] = append(byImpl[impl], v)
}

// splitName turns "BenchmarkThroughput/client-go/metrics-2" into scenario
// "Throughput/metrics", implementation "client-go" and GOMAXPROCS 2. A
// name whose second part is not one of the implementations
// ("BenchmarkUpdate/helper/memstore/1writers-2", "BenchmarkPgstoreWrite-2")
// is converge's alone: the whole name is the scenario
// ("Update/helper/memstore/1writers"), converge the implementation.
func splitName(name string) (scenario, impl string, procs int, ok bool) {
	name, ok = strings.CutPrefix(name, "Benchmark")
	if !ok || name == "" {
		return "", "", 0, false
	}
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			name, procs = name[:i], n
		}
	}
	parts := strings.Split(name, "/")
	if len(parts) < 2 || !slices.Contains(implementations, parts[1]) {
		return name, converge, procs, true
	}
	scenario = strings.Join(append([]string{parts[0]}, parts[2:]...), "/")
	return scenario, parts[1], procs, true
}

// implementations are the names a benchmark's second part may have to be
// compared in the table's columns.
var implementations = []string{converge, clientGo, priorityQueue, controllerRuntime}

// Median returns the median of vs, NaN if empty.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Value is the median of one metric of one implementation, NaN if missing.
func (res *Results) Value(k Key, impl string) float64 {
	return Median(res.Samples[k.Scenario][k.Metric][impl])
}

// Runs is the largest number of samples of any metric.
func (res *Results) Runs() int {
	n := 0
	for _, byMetric := range res.Samples {
		for _, byImpl := range byMetric {
			for _, vs := range byImpl {
				n = max(n, len(vs))
			}
		}
	}
	return n
}

// check is one condition of a target: converge's median compared with
// another implementation's (ratio converge/other op value) or, when other
// is empty, with an absolute value. With perRep set it must also hold in
// the repetitions, each compared with the other implementation's
// repetition of the same index (the benchmark printed them one after the
// other, so they ran under the same conditions).
type check struct {
	other string
	op    string // ">=", "<=", "==", ">", "<"
	value float64
	// perRep: the check must also hold in each repetition but at most
	// missable of them.
	perRep   bool
	missable int
	// stallMetric, if set, names converge's per-repetition metric of the
	// longest host stall (stall-max-µs): a repetition that misses while
	// converge's stall in it was at least as long as converge's value is
	// the host's, not the code's, and is left out of the count.
	stallMetric string
}

// vs is the check "converge's median op value", as a ratio to other's
// median, or as an absolute value when other is "".
func vs(other, op string, value float64) check {
	return check{other: other, op: op, value: value}
}

// inEveryRep makes c also hold in each repetition.
func (c check) inEveryRep() check { c.perRep, c.missable = true, 0; return c }

// inAllRepsButOne makes c also hold in each repetition but one at most.
func (c check) inAllRepsButOne() check { c.perRep, c.missable = true, 1; return c }

// exceptHostStalls leaves out of c's per-repetition count the repetitions
// whose miss a host stall explains (see check.stallMetric).
func (c check) exceptHostStalls() check { c.stallMetric = "stall-max-µs"; return c }

func (c check) met(conv, other float64) (met, known bool) {
	x := conv
	if c.other != "" {
		if other == 0 || math.IsNaN(other) {
			return false, false
		}
		x = conv / other
	}
	if math.IsNaN(x) {
		return false, false
	}
	switch c.op {
	case ">=":
		return x >= c.value, true
	case "<=":
		return x <= c.value, true
	case "==":
		return x == c.value, true
	case ">":
		return x > c.value, true
	case "<":
		return x < c.value, true
	}
	panic("unknown op " + c.op)
}

// Target is the goal for one row of the table.
type Target struct {
	Text   string
	checks []check
}

// Met evaluates the target on res; known is false if a value is missing.
func (t Target) Met(res *Results, k Key) (met, known bool) {
	met, _, known = t.met(res, k)
	return met, known
}

// met is Met, and how many repetitions were left out as host stalls.
func (t Target) met(res *Results, k Key) (met bool, stalled int, known bool) {
	conv := res.Value(k, converge)
	met = true
	for _, c := range t.checks {
		var other float64
		if c.other != "" {
			other = res.Value(k, c.other)
		}
		m, ok := c.met(conv, other)
		if !ok {
			return false, 0, false
		}
		if c.perRep {
			var stalls []float64
			if c.stallMetric != "" {
				stalls = res.Samples[k.Scenario][c.stallMetric][converge]
			}
			held, st, n, ok := c.reps(res.Samples[k.Scenario][k.Metric], stalls)
			if !ok {
				return false, 0, false
			}
			m = m && n-held-st <= c.missable
			stalled = max(stalled, st)
		}
		met = met && m
	}
	return met, stalled, true
}

// reps counts the repetitions in which c holds, of n compared, and those
// that miss while converge's host stall in them (stalls, by repetition;
// nil: none known) was at least as long as converge's value; ok is false
// if there are none, or if the other implementation has a different
// number of them (they could not be paired).
func (c check) reps(byImpl map[string][]float64, stalls []float64) (held, stalled, n int, ok bool) {
	conv := byImpl[converge]
	if c.other != "" && len(byImpl[c.other]) != len(conv) {
		return 0, 0, 0, false
	}
	for i, v := range conv {
		var other float64
		if c.other != "" {
			other = byImpl[c.other][i]
		}
		m, known := c.met(v, other)
		switch {
		case !known:
			return 0, 0, 0, false
		case m:
			held++
		case len(stalls) == len(conv) && stalls[i] >= v:
			stalled++
		}
	}
	return held, stalled, len(conv), len(conv) > 0
}

// Targets are the table's goals, keyed by row.
var Targets = map[Key]Target{
	{"Throughput", "items/s"}: {"≥ 2x client-go in every rep, ≥ 10x priorityqueue",
		[]check{vs(clientGo, ">=", 2).inEveryRep(), vs(priorityQueue, ">=", 10)}},
	{"Throughput/metrics", "items/s"}: {"≥ 3x client-go, ≥ 2x in every rep",
		[]check{vs(clientGo, ">=", 3), vs(clientGo, ">=", 2).inEveryRep()}},
	{"RoundTrip", "ns/op"}:      {"≤ 0.7x client-go", []check{vs(clientGo, "<=", 0.7)}},
	{"RoundTrip", "allocs/op"}:  {"= 0", []check{vs("", "==", 0)}},
	{"Memory", "B/key"}:         {"≤ 1x client-go", []check{vs(clientGo, "<=", 1)}},
	{"AddAfter", "p99-late-ms"}: {"≤ 1 ms", []check{vs("", "<=", 1)}},
	{"AddAfter", "addafter-ns"}: {"≤ 0.25x client-go", []check{vs(clientGo, "<=", 0.25)}},
	{"Steady", "p99-µs"}:        {"≤ 1x client-go", []check{vs(clientGo, "<=", 1)}},
	// A stall of the producer's thread explains a maximum, not a p99.9:
	// its stalls, between two adds of one clump, are as long as the
	// p99.9s themselves.
	{"Steady", "p999-µs"}: {"≤ 1x client-go in every rep",
		[]check{vs(clientGo, "<=", 1).inEveryRep()}},
	{"Steady", "max-µs"}: {"≤ 1x client-go in every rep not stalled by the host",
		[]check{vs(clientGo, "<=", 1).inEveryRep().exceptHostStalls()}},
	{"Storm", "storm-gets"}: {"> 0 (workers keep receiving)", []check{vs("", ">", 0)}},
}

// informerSizes are the object counts of the informer scenarios, as their
// sub-benchmarks name them (BenchmarkInformerSync/converge/10k).
var informerSizes = []string{"10k", "100k", "1M"}

func init() {
	for _, n := range informerSizes {
		Targets[Key{"InformerSync/" + n, "objects/s"}] = Target{"≥ 2x client-go", []check{vs(clientGo, ">=", 2)}}
		Targets[Key{"InformerMemory/" + n, "B/object"}] = Target{"≤ 0.6x client-go", []check{vs(clientGo, "<=", 0.6)}}
		Targets[Key{"InformerFanout/" + n, "events/s"}] = Target{"≥ 2x client-go", []check{vs(clientGo, ">=", 2)}}
	}
	for _, sc := range []struct{ name, title string }{
		{"InformerSync", "7. informer initial sync, %s objects"},
		{"InformerMemory", "8. informer heap per cached object, %s objects"},
		{"InformerFanout", "9. informer fan-out of 100k updates, %s objects"},
	} {
		for _, n := range informerSizes {
			Scenarios = append(Scenarios, Scenario{sc.name + "/" + n, fmt.Sprintf(sc.title, n), srcMemstore})
		}
	}
}

// Scenario is one row group of the table: a benchmark's scenario name (as
// splitName returns it), its number and description, and the Source
// converge's side was fed by.
type Scenario struct {
	Name, Title string
	// Source names what fed converge's side: a store (memstore, etcdstore,
	// pgstore), a diagnostic Source of the benchmark, or none (a queue or a
	// lock measured alone). Empty: derived from the name (sourceOf).
	Source string
}

// The Sources of the table's Source column.
const (
	srcNone     = "none (queue alone)"
	srcMemstore = "memstore"
	srcEtcd     = "etcdstore (etcd)"
	srcPg       = "pgstore (PostgreSQL)"
)

// Scenarios gives each benchmark function its number and description, in
// table order.
var Scenarios = []Scenario{
	{"Throughput", "1. throughput, 8 producers / 8 workers, 1M keys", srcNone},
	{"Throughput/metrics", "1. throughput, 8 producers / 8 workers, 1M keys, metrics on", srcNone},
	{"RoundTrip", "2. Add+Get+Done, one goroutine", srcNone},
	{"Memory", "3. memory, 1M keys queued", srcNone},
	{"AddAfter", "4. 1M AddAfter (0-100 ms), 4 workers", srcNone},
	{"Steady", "5. steady 50k adds/s for 2 s, 4 workers", srcNone},
	{"Storm", "6. add storm, 4 producers × 1M adds over 1k keys, 4 workers", srcNone},
}

// sourceOf is the Source column of a scenario: the one Scenarios gives it,
// or else the store its benchmark's name names (BenchmarkUpdate/helper/memstore/…).
func sourceOf(scenario string) string {
	for _, sc := range Scenarios {
		if sc.Name == scenario && sc.Source != "" {
			return sc.Source
		}
	}
	for _, part := range strings.Split(strings.ToLower(scenario), "/") {
		for _, s := range []struct{ prefix, source string }{
			{"memstore", srcMemstore}, {"etcd", srcEtcd}, {"pgstore", srcPg}, {"postgres", srcPg},
			{"sqlite", "sqlitestore (SQLite file)"}, {"httpstore", "httpstore (HTTP, memstore behind)"},
		} {
			if strings.HasPrefix(part, s.prefix) {
				return s.source
			}
		}
	}
	return ""
}

// Rows returns the rows in scenario order, then metric order as printed.
func (res *Results) Rows() []Key {
	rank := func(s string) int {
		for i, sc := range Scenarios {
			if sc.Name == s {
				return i
			}
		}
		return len(Scenarios)
	}
	rows := slices.Clone(res.Order)
	slices.SortStableFunc(rows, func(a, b Key) int { return rank(a.Scenario) - rank(b.Scenario) })
	return rows
}

// Table renders the markdown table of medians, ratios and targets, and
// counts the targets met.
func (res *Results) Table() (table string, met, total int) {
	var b strings.Builder
	b.WriteString("| scenario | metric | converge | client-go | priorityqueue or controller-runtime | converge/client-go | converge/(priorityqueue or controller-runtime) | target | met | converge/client-go per rep [min..max] | converge's Source |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|---|---|---|---|\n")
	for _, k := range res.Rows() {
		title := k.Scenario
		for _, sc := range Scenarios {
			if sc.Name == k.Scenario {
				title = sc.Title
			}
		}
		third := priorityQueue
		if _, ok := res.Samples[k.Scenario][k.Metric][controllerRuntime]; ok {
			third = controllerRuntime
		}
		conv, cg, pq := res.Value(k, converge), res.Value(k, clientGo), res.Value(k, third)
		t, hasTarget := Targets[k]
		verdict := ""
		if hasTarget {
			total++
			m, stalled, known := t.met(res, k)
			switch {
			case !known:
				verdict = "n/a"
			case m:
				verdict = "yes"
				met++
			default:
				verdict = "no"
			}
			if known && stalled > 0 {
				verdict += fmt.Sprintf(" (%d rep(s) left out: the host stalled the process at least as long)", stalled)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			title, k.Metric, num(conv), num(cg), num(pq), ratio(conv, cg), ratio(conv, pq), t.Text, verdict,
			res.repRange(k, clientGo), sourceOf(k.Scenario))
	}
	return b.String(), met, total
}

// repRange is "[min..max] of n": the smallest and largest ratio of
// converge's repetition to other's repetition of the same index, or empty
// when there are fewer than two pairs (or the repetitions cannot be paired).
func (res *Results) repRange(k Key, other string) string {
	byImpl := res.Samples[k.Scenario][k.Metric]
	conv, oth := byImpl[converge], byImpl[other]
	if len(conv) < 2 || len(conv) != len(oth) {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range conv {
		if oth[i] == 0 {
			return ""
		}
		r := v / oth[i]
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("[%s..%s] of %d", strings.TrimSuffix(ratio(lo, 1), "x"), strings.TrimSuffix(ratio(hi, 1), "x"), len(conv))
}

// num formats a median with about four significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "—"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || v == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	r := a / b
	if r != 0 && math.Abs(r) < 0.1 {
		return strconv.FormatFloat(r, 'g', 2, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}
