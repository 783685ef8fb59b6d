package simtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/reconcile/simtest"
)

func TestSampleShouldNeverDrawTwoFaultsAtOneWrite(t *testing.T) {
	for writes := 1; writes <= 4; writes++ {
		for seed := range uint64(500) {
			s := simtest.Sample(seed, writes, simtest.Crash, simtest.Stale, simtest.Panic, simtest.Ambiguous, simtest.Depose)
			at := map[int]bool{}
			for _, f := range s.Faults {
				require.False(t, at[f.At], "seed %d over %d writes: %s", seed, writes, s)
				at[f.At] = true
				require.True(t, f.At >= 1 && f.At <= writes, "seed %d: %s", seed, s)
			}
		}
	}
}

func TestAScheduleWithTwoFaultsAtOneWriteShouldBeRefused(t *testing.T) {
	_, err := simtest.ParseSchedule("crash@3 panic@3")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "two faults at write 3")
	_, err = simtest.ParseSchedule("depose@1,1")
	assert.Error(t, err)
}

func TestTheSummaryOfAReplayedScheduleShouldNameItNotASample(t *testing.T) {
	spec := counterSpec(twoWrites)
	spec.Workload = append(spec.Workload, putK)
	spec.Observe = func(w *counters) any { return w.store.Len() } // which process wrote differs
	spec.Mode, spec.Seed = simtest.Sampled, 5
	withSchedule(t, "crash@1")
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, "crash@1", r.Replayed.String())
	assert.NotContains(t, r.Summary(), "sampled")
	assert.Contains(t, r.Summary(), "simtest: 1 schedule (-simtest.schedule='crash@1', 6 writes in the reference)")
}

func TestRunShouldReturnTheReportOfAPassingSpec(t *testing.T) {
	spec := counterSpec(twoWrites)
	spec.Workload = append(spec.Workload, putK)
	spec.Observe = func(w *counters) any { return w.store.Len() } // which process wrote differs
	r := simtest.Run(t, spec)
	require.NotNil(t, r)
	assert.Empty(t, r.Failure)
	assert.Equal(t, 6, r.Writes, "a and b, from each of three reconciles")
	assert.Equal(t, r.Writes, r.Schedules, "one crash per write")
	assert.Positive(t, r.Elapsed)
	assert.Less(t, r.Elapsed, time.Minute)
}
