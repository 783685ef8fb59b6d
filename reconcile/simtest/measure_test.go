package simtest_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/converge-go/converge/reconcile/simtest"
)

// measure runs check from 100 first seeds and logs how many schedules it
// took to find the bug (median, 90th percentile, worst) and the wall time
// to the find, shrinking and the report's reruns included. For the design
// note's table; set SIMTEST_MEASURE=1 to run it.
func measure(t *testing.T, check func(seed uint64) *simtest.Report) {
	if os.Getenv("SIMTEST_MEASURE") == "" {
		t.Skip("set SIMTEST_MEASURE=1 to measure")
	}
	var found []int
	var took []time.Duration
	missed := 0
	for i := range uint64(100) {
		began := time.Now()
		r := check(1 + i*1000)
		if r.Failure == "" {
			missed++
			continue
		}
		found = append(found, r.Schedules)
		took = append(took, time.Since(began))
	}
	slices.Sort(found)
	slices.Sort(took)
	n := len(found)
	t.Logf("found from %d of 100 first seeds; schedules to find: median %d, p90 %d, max %d; wall time: median %v, p90 %v, max %v",
		n, found[n/2], found[n*9/10], found[n-1], took[n/2], took[n*9/10], took[n-1])
}

func TestMeasureSeedsToFindTheStaleCacheBug(t *testing.T) {
	measure(t, func(seed uint64) *simtest.Report {
		s := storageSpec(true)
		s.Seed, s.Runs = seed, 100
		return simtest.Check(t, s)
	})
}

func TestMeasureSeedsToFindTheOwnerByNameBug(t *testing.T) {
	measure(t, func(seed uint64) *simtest.Report {
		s := fleetSpec(true)
		s.Seed, s.Runs = seed, 100
		return simtest.Check(t, s)
	})
}

func TestMeasureSeedsToFindTheTransientStatusBug(t *testing.T) {
	measure(t, func(seed uint64) *simtest.Report {
		s := jobsSpec(true)
		s.Seed, s.Runs = seed, 100
		return simtest.Check(t, s)
	})
}

func TestMeasureSeedsToFindTheDeposedLeaderBug(t *testing.T) {
	measure(t, func(seed uint64) *simtest.Report {
		s := replicasSpec(false)
		s.Seed, s.Runs = seed, 100
		return simtest.Check(t, s)
	})
}
