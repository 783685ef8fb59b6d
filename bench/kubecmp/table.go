package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

// metric is one column of the table: how to read it from a result, and
// whether lower is better (every metric here is).
type metric struct {
	name string
	get  func(result) float64
	unit string
}

var metrics = []metric{
	{"sync", func(r result) float64 { return r.SyncSeconds }, "s"},
	{"sync + reconcile once", func(r result) float64 { return r.OnceSeconds }, "s"},
	{"client CPU per object (sync + once)", func(r result) float64 { return r.OnceCPUPerObject }, "µs"},
	{"heap per cached object", func(r result) float64 { return r.HeapPerObject }, "B"},
	{"server time per PUT (once)", func(r result) float64 { return r.ServerPutMs }, "ms"},
	{"server PUT time ÷ (workers × once)", func(r result) float64 { return r.ServerPutShare }, ""},
	{"requests per reconcile (once)", func(r result) float64 { return r.OnceRequests }, ""},
	{"requests per reconcile (steady)", func(r result) float64 { return r.SteadyRequests }, ""},
	{"write → reconcile p50", func(r result) float64 { return r.LatencyP50 }, "ms"},
	{"write → reconcile p99", func(r result) float64 { return r.LatencyP99 }, "ms"},
}

// printTable prints, per object count, one row per metric: each
// implementation's median [min..max], and each converge variant's median
// divided by controller-runtime's (below 1: converge is faster or smaller).
func printTable(w io.Writer, o options, all map[section]map[string][]result) {
	fmt.Fprintf(w, "Same controller over %s, same kube-apiserver, one run at a time; median [min..max] of %d runs; %s, GOMAXPROCS=%d.\n", resourceTitle(o.resource), o.reps, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Steady phase: %.0f writes/s for %s. Command: go -C bench run ./kubecmp -resource %s -objects %s -workers %s -impl %s -reps %d -rate %.0f -steady %s\n\n",
		o.rate, o.steady, o.resource, joinInts(o.objects), joinInts(o.workers), strings.Join(o.impls, ","), o.reps, o.rate, o.steady)
	var others []string
	for _, impl := range o.impls {
		if impl != implControllerRuntime {
			others = append(others, impl)
		}
	}
	for _, sec := range sections(o) {
		fmt.Fprintf(w, "**%d %s, %s**\n\n| metric | %s |", sec.objects, resourceTitle(o.resource), workersTitle(sec.workers), strings.Join(o.impls, " | "))
		for _, impl := range others {
			fmt.Fprintf(w, " %s ÷ cr |", impl)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(o.impls)+len(others)))
		for _, m := range metrics {
			fmt.Fprintf(w, "| %s |", m.name)
			for _, impl := range o.impls {
				med, lo, hi := summary(all[sec][impl], m.get)
				fmt.Fprintf(w, " %s [%s..%s]%s |", num(med), num(lo), num(hi), unit(m.unit))
			}
			cr, _, _ := summary(all[sec][implControllerRuntime], m.get)
			for _, impl := range others {
				med, _, _ := summary(all[sec][impl], m.get)
				if cr == 0 {
					fmt.Fprint(w, " – |")
					continue
				}
				fmt.Fprintf(w, " %.2f |", med/cr)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
}

func sections(o options) []section {
	var out []section
	for _, n := range o.objects {
		for _, w := range o.workers {
			out = append(out, section{n, w})
		}
	}
	return out
}

func resourceTitle(resource string) string {
	switch resource {
	case resourceCRD:
		return "BenchItems (a custom resource; the reconciler writes its status subresource)"
	case resourceCRDAnnotation:
		return "BenchItems (a custom resource; the reconciler writes an annotation)"
	}
	return "ConfigMaps"
}

func workersTitle(w int) string {
	switch w {
	case 0:
		return "each library's default workers (1)"
	case 1:
		return "1 worker each"
	}
	return fmt.Sprintf("%d workers each", w)
}

func summary(rs []result, get func(result) float64) (med, lo, hi float64) {
	if len(rs) == 0 {
		return 0, 0, 0
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = get(r)
	}
	return medianRange(xs)
}

// medianRange returns the median, least and greatest of xs (0s for none);
// it sorts xs.
func medianRange(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	med = xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return med, xs[0], xs[len(xs)-1]
}

func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
