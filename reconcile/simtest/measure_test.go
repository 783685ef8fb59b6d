package simtest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/converge-go/converge/reconcile/simtest"
)

// measuring reports whether SIMTEST_MEASURE=1 asks for the full
// measurements of the design note's tables. Without it the measuring tests
// run a small part of them, which must still pass.
func measuring() bool { return os.Getenv("SIMTEST_MEASURE") != "" }

// measure runs check from the first seeds (100 when measuring, else 5),
// fails unless every one finds the bug, and logs how many schedules it
// took (median, 90th percentile, worst) and the wall time to the find,
// shrinking and the report's reruns included.
func measure(t *testing.T, check func(t *testing.T, seed uint64) *simtest.Report) {
	seeds := uint64(5)
	if measuring() {
		seeds = 100
	}
	var found []int
	var took []time.Duration
	missed := 0
	for i := range seeds {
		began := time.Now()
		r := check(t, 1+i*1000)
		if r.Failure == "" {
			missed++
			continue
		}
		found = append(found, r.Schedules)
		took = append(took, time.Since(began))
	}
	if missed > 0 {
		t.Errorf("missed from %d of the %d first seeds", missed, seeds)
	}
	if len(found) == 0 {
		return
	}
	slices.Sort(found)
	slices.Sort(took)
	n := len(found)
	t.Logf("found from %d of %d first seeds; schedules to find: median %d, p90 %d, max %d; wall time: median %v, p90 %v, max %v",
		n, seeds, found[n/2], found[n*9/10], found[n-1], took[n/2], took[n*9/10], took[n-1])
}

// TestMeasureSeedsToFind measures planted bugs 2-5.
func TestMeasureSeedsToFind(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(t *testing.T, seed uint64) *simtest.Report
	}{
		{"StaleCache", func(t *testing.T, seed uint64) *simtest.Report { return seeded(t, storageSpec(true), seed) }},
		{"OwnerByName", func(t *testing.T, seed uint64) *simtest.Report { return seeded(t, fleetSpec(true), seed) }},
		{"TransientStatus", func(t *testing.T, seed uint64) *simtest.Report { return seeded(t, jobsSpec(true), seed) }},
		{"DeposedLeader", func(t *testing.T, seed uint64) *simtest.Report { return seeded(t, replicasSpec(false), seed) }},
	} {
		t.Run(c.name, func(t *testing.T) { measure(t, c.check) })
	}
}

// seeded checks spec from seed, 100 schedules at most.
func seeded[W any](t *testing.T, spec simtest.Spec[W], seed uint64) *simtest.Report {
	spec.Seed, spec.Runs = seed, 100
	return simtest.Check(t, spec)
}

// TestMeasureThroughput logs runs per second of the corrected samples in
// Sampled mode, and of the binder over 1, 4 and 16 claims with their
// volumes (two workload steps per claim, one bind each), for the note's
// table of cost against keys and writes. Runs are bubbles, which need a
// *testing.T: hence a test that measures, not a Benchmark.
// Without SIMTEST_MEASURE=1 each runs 20 schedules, not 500.
func TestMeasureThroughput(t *testing.T) {
	runs := 20
	if measuring() {
		runs = 500
	}
	log := func(name string, r *simtest.Report) {
		if r.Failure != "" {
			t.Fatal(r.Failure)
		}
		t.Logf("%-28s %4d writes/run  %5d runs/s", name, r.Writes, int(float64(r.Schedules+2)/r.Elapsed.Seconds()))
	}
	for _, keys := range []int{1, 4, 16} {
		s := storageSpec(false)
		s.Workload = nil
		for i := range keys {
			claim, vol := "c"+strconv.Itoa(i), "v"+strconv.Itoa(i)
			s.Workload = append(s.Workload,
				func(_ context.Context, w *storage) error { w.claims.Put(claim, Claim{Size: 1}); return nil },
				func(_ context.Context, w *storage) error { w.volumes.Put(vol, Volume{Claim: claim}); return nil })
		}
		s.Runs = runs
		log(fmt.Sprintf("binder, keys=%d", keys), simtest.Check(t, s))
	}
	for _, c := range []struct {
		name string
		run  func() *simtest.Report
	}{
		{"parents (exhaustive)", func() *simtest.Report { return simtest.Check(t, parentSpec(false)) }},
		{"pods by UID", func() *simtest.Report { s := fleetSpec(false); s.Runs = runs; return simtest.Check(t, s) }},
		{"alerts on the count", func() *simtest.Report { s := jobsSpec(false); s.Runs = runs; return simtest.Check(t, s) }},
		{"fenced leader", func() *simtest.Report { s := replicasSpec(true); s.Runs = runs; return simtest.Check(t, s) }},
	} {
		log(c.name, c.run())
	}
}
