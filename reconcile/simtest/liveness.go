package simtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// declared returns the name of Spec.Periodic that covers name, and its
// period; "" if none does. An exact name wins over a prefix, a longer
// prefix over a shorter.
func declared(periodic map[string]time.Duration, name string) (string, time.Duration) {
	if name == "" {
		return "", 0
	}
	if d, ok := periodic[name]; ok {
		return name, d
	}
	best := ""
	for p := range periodic {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return "", 0
	}
	return best, periodic[best]
}

// periodOf returns the name a write counts under, its key's or else the
// reconcile's that made it, whichever Spec.Periodic covers, and the
// declared period; "" if neither is covered.
func periodOf(periodic map[string]time.Duration, w writeRecord) (string, time.Duration) {
	if n, d := declared(periodic, w.object); n != "" {
		return w.object, d
	}
	if n, d := declared(periodic, w.by); n != "" {
		return w.by, d
	}
	return "", 0
}

// unplanned returns the writes of ws no declared period covers.
func unplanned(periodic map[string]time.Duration, ws []writeRecord) []writeRecord {
	var out []writeRecord
	for _, w := range ws {
		if n, _ := periodOf(periodic, w); n == "" {
			out = append(out, w)
		}
	}
	return out
}

// allowance is how many times a name of period d may act in window w on
// top of what it may anyway: once a period, and once more for the phase.
func allowance(d, w time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(w/d) + 1
}

// quietFailure judges the quiet window: ws are its writes, before and
// after the reconcile counts at its start and end. It returns "" if the
// system stayed converged: no undeclared write, no declared name acting
// more often than its period, no key reconciled more than
// MaxReconcilesPerKey times beyond its period's allowance.
func quietFailure[W any](spec *Spec[W], ws []writeRecord, before, after map[string]int) string {
	if bad := unplanned(spec.Periodic, ws); len(bad) > 0 {
		return fmt.Sprintf("%d writes in the %v after it converged (not stable), the first: %s", len(bad), spec.Quiet, bad[0])
	}
	// Counted per key, not per declared name: "pods/*" gives each pod
	// its period.
	perName, period := map[string]int{}, map[string]time.Duration{}
	for _, w := range ws {
		n, d := periodOf(spec.Periodic, w)
		perName[n]++
		period[n] = d
	}
	for _, n := range slices.Sorted(maps.Keys(perName)) {
		d := period[n]
		if most := allowance(d, spec.Quiet); perName[n] > most {
			return fmt.Sprintf("%s written %d times in the %v after it converged (at most %d for its declared period of %v): a hot loop",
				n, perName[n], spec.Quiet, most, d)
		}
	}
	for _, who := range slices.Sorted(maps.Keys(after)) {
		name, d := declared(spec.Periodic, who)
		most := spec.MaxReconcilesPerKey + allowance(d, spec.Quiet)
		if n := after[who] - before[who]; n > most {
			why := fmt.Sprintf("at most %d allowed", most)
			if name != "" {
				why = fmt.Sprintf("at most %d allowed: %d, and %d for its declared period of %v", most, spec.MaxReconcilesPerKey, most-spec.MaxReconcilesPerKey, d)
			}
			return fmt.Sprintf("%s reconciled %d times in the %v after it converged (%s): a hot loop", who, n, spec.Quiet, why)
		}
	}
	return ""
}
