package simtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// writeRecord is one write of a run, for the report.
type writeRecord struct {
	n        int
	what     string // "Create children/a-0-0", or an Effect's what
	object   string // "children/a-0-0", or an Effect's what
	by       string // "parents/a", or "" outside a counted reconcile
	err      error
	fault    *Fault // the schedule's fault at this write, if any
	sequence int    // the how-manieth write of this reconcile's key
	// incarnation is the writing process's; late is set if it had been
	// deposed (it runs beside its successor), stale if its informers
	// lagged behind the stores (a stale restart's window).
	incarnation int
	late, stale bool
}

func (w writeRecord) String() string {
	s := fmt.Sprintf("write %d = %s", w.n, w.what)
	if w.by != "" {
		s += fmt.Sprintf(" by reconcile of %s (its write #%d)", w.by, w.sequence)
	}
	if w.err != nil {
		s += fmt.Sprintf(" (failed: %v)", w.err)
	}
	switch {
	case w.fault != nil && w.fault.Kind == Depose:
		s += fmt.Sprintf("; process %d froze before it, and made it late", w.incarnation)
	case w.fault != nil:
		s += fmt.Sprintf("; %s after it", w.fault.Kind)
	case w.late:
		s += fmt.Sprintf("; by process %d after it was deposed, beside its successor", w.incarnation)
	case w.stale:
		s += fmt.Sprintf("; by process %d while its informers lagged behind the stores", w.incarnation)
	}
	return s
}

// maxNamed bounds the writes of faulty processes a report names besides
// the faults' own.
const maxNamed = 12

// named returns the writes a failure report names: each write the
// schedule put a fault at, and every write a faulty process made while it
// was so (a deposed process's, a stale restart's while its informers
// lagged), which are what may have done the damage; the latter at most
// maxNamed, and how many more there were.
func named(log []writeRecord) (out []writeRecord, more int) {
	extra := 0
	for _, w := range log {
		switch {
		case w.fault != nil:
			out = append(out, w)
		case w.late || w.stale:
			if extra++; extra > maxNamed {
				more++
				continue
			}
			out = append(out, w)
		}
	}
	return out, more
}

// fights finds the keys two processes wrote while both ran: a deposed
// process, after its freeze, and another beside it. One line each.
func fights(log []writeRecord) []string {
	frozeAt := map[int]int{} // incarnation -> its first freeze
	for _, w := range log {
		if w.fault != nil && w.fault.Kind == Depose {
			if _, ok := frozeAt[w.incarnation]; !ok {
				frozeAt[w.incarnation] = w.n
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range slices.Sorted(maps.Keys(frozeAt)) {
		from := frozeAt[a]
		byObject := map[string][]writeRecord{}
		var objects []string
		for _, w := range log {
			if w.n < from {
				continue
			}
			if _, ok := byObject[w.object]; !ok {
				objects = append(objects, w.object)
			}
			byObject[w.object] = append(byObject[w.object], w)
		}
		for _, o := range objects {
			ws := byObject[o]
			procs := map[int]bool{}
			for _, w := range ws {
				procs[w.incarnation] = true
			}
			if !procs[a] || len(procs) < 2 || seen[o] {
				continue
			}
			seen[o] = true
			var who, writes []string
			for _, p := range slices.Sorted(maps.Keys(procs)) {
				who = append(who, fmt.Sprint(p))
			}
			for _, w := range ws {
				note := fmt.Sprintf("process %d", w.incarnation)
				if w.incarnation == a {
					note += ", deposed"
				}
				if w.err != nil {
					note += ", failed"
				}
				writes = append(writes, fmt.Sprintf("%d (%s)", w.n, note))
			}
			out = append(out, fmt.Sprintf("processes %s fought over %s: writes %s",
				strings.Join(who, " and "), o, strings.Join(writes, ", ")))
		}
	}
	return out
}

// failureReport reruns the shrunk schedule twice more (the Go scheduler is
// not under the kit's control: the design's "Determinism") and formats the report.
func failureReport[W any](t *testing.T, spec *Spec[W], found, s Schedule, ref *outcome, out outcome) string {
	again := 1
	for range 2 {
		if o := execute(t, spec, s, ref); o.failure != "" {
			again++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "simtest: %s: %s oracle failed (reproduced %d/3)\n", t.Name(), out.oracle, again)
	fmt.Fprintf(&b, "  schedule: %s", s)
	if found.String() != s.String() {
		fmt.Fprintf(&b, "   (shrunk from %s)", found)
	}
	fmt.Fprintf(&b, "\n  %s\n", out.failure)
	ws, more := named(out.log)
	for _, w := range ws {
		fmt.Fprintf(&b, "  %s\n", w)
	}
	if more > 0 {
		fmt.Fprintf(&b, "  ... and %d more writes of faulty processes\n", more)
	}
	for _, f := range fights(out.log) {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	if out.oracle == "differential" {
		fmt.Fprintf(&b, "  observed: %s\n", diff(ref.observed, out.observed))
	}
	fmt.Fprintf(&b, "  rerun: go test -run '^%s$' -args -simtest.schedule='%s'", t.Name(), s)
	return b.String()
}

// diff shows both end states; Observe's values are small by design.
func diff(want, got any) string {
	return fmt.Sprintf("reference %+v, this run %+v", want, got)
}
