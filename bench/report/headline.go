package main

import (
	"fmt"
	"strings"
	"time"
)

// The README's performance table: a few rows of the run, as ratios, with
// the run's date and machine. make bench replaces the lines between
// headlineBegin and headlineEnd of headlineFile with it, as it does the
// full table in spliceFile, so that the README never quotes another run
// than the documentation's.
const (
	// headlineFile is relative to the bench module, like spliceFile.
	headlineFile  = "../README.md"
	headlineBegin = "<!-- bench:headline:begin -->"
	headlineEnd   = "<!-- bench:headline:end -->"
)

// headlineRow is one row of the README's table: the ratio of converge's
// median to client-go's and to the third implementation's (the
// controller rows' controller-runtime, the queue rows' priority queue;
// none for rows without one). The rows with two metrics (p50 / p99) show
// both ratios in each cell.
type headlineRow struct {
	label    string
	scenario string
	metrics  []string
}

// headlineRows are the README's rows, in its order.
var headlineRows = []headlineRow{
	{"queue throughput, 8 producers / 8 workers, 1M keys (items/s)", "Throughput", []string{"items/s"}},
	{"queue Add + Get + Done on one goroutine (time)", "RoundTrip", []string{"ns/op"}},
	{"1M `AddAfter`, p99 lateness", "AddAfter", []string{"p99-late-ms"}},
	{"informer initial sync, 100k objects (objects/s)", "InformerSync/100k", []string{"objects/s"}},
	{"informer heap per cached object, 100k objects", "InformerMemory/100k", []string{"B/object"}},
	{"informer fan-out of 100k updates, 100k objects (events/s)", "InformerFanout/100k", []string{"events/s"}},
	{"controller: 100k stored objects listed and each reconciled once, 4 workers (time)", "ReconcileThroughput/workers=4", []string{"ns/op"}},
	{"controller: the same, 1M objects (time)", "ReconcileThroughput1M", []string{"ns/op"}},
	{"controller: store write → reconcile start at 10k writes/s, p50 / p99 / max", "ReconcileLatency", []string{"p50-µs", "p99-µs", "max-µs"}},
	{"burst of 200k updates over 10k keys, time to drain", "ReconcileBurst", []string{"drain-ms"}},
}

// headline renders the README's table from res: its rows, each with the
// Source that fed converge's side (as in the full table), then a line
// with the run's size, date and machine and how many targets it met.
func headline(res *Results, count string, now time.Time) string {
	var b strings.Builder
	b.WriteString("| scenario | converge ÷ client-go | converge ÷ controller-runtime | converge's Source |\n")
	b.WriteString("| --- | --: | --: | --- |\n")
	for _, r := range headlineRows {
		third := controllerRuntime
		if _, ok := res.Samples[r.scenario][r.metrics[0]][controllerRuntime]; !ok {
			third = priorityQueue
		}
		cg, other := make([]string, len(r.metrics)), make([]string, len(r.metrics))
		for i, m := range r.metrics {
			k := Key{r.scenario, m}
			cg[i] = ratio(res.Value(k, converge), res.Value(k, clientGo))
			other[i] = ratio(res.Value(k, converge), res.Value(k, third))
		}
		o := strings.Join(other, " / ")
		if strings.Trim(o, "—/ ") == "" {
			o = "—"
		} else if third == priorityQueue {
			o += " (its priority queue)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.label, strings.Join(cg, " / "), o, sourceOf(r.scenario))
	}
	_, met, total := res.Table()
	cpu, procs := res.machine()
	fmt.Fprintf(&b, "\nMedians of %s repetitions, from the run of %s on %s, GOMAXPROCS %d; %d of its %d targets met.\n",
		count, now.UTC().Format("2006-01-02"), cpu, procs, met, total)
	return b.String()
}
