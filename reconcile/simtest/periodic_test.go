package simtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// recheck is a controller that looks at every key again every period,
// writing nothing: a drift check.
func recheck(period time.Duration) simtest.Spec[*counters] {
	spec := counterSpec(func(*simtest.Process, *counters, informer.Store[string, int]) recFunc {
		return func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{RequeueAfter: period}, nil
		}
	})
	spec.Workload = append(spec.Workload, putK)
	return spec
}

func TestAPeriodicRecheckShouldPassOnceItsPeriodIsDeclared(t *testing.T) {
	undeclared := simtest.Check(t, recheck(30*time.Second))
	require.NotEmpty(t, undeclared.Failure, "undeclared, a re-check is a hot loop")
	assert.Contains(t, undeclared.Failure, "ints/k reconciled 20 times")

	spec := recheck(30 * time.Second)
	spec.Periodic = map[string]time.Duration{"ints/k": 30 * time.Second}
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure)
	assert.Zero(t, r.Writes, "a re-check writes nothing")

	wildcard := recheck(30 * time.Second)
	wildcard.Periodic = map[string]time.Duration{"ints/*": 30 * time.Second}
	assert.Empty(t, simtest.Check(t, wildcard).Failure, "a prefix covers the controller's keys")
}

func TestAKeyReconciledMoreOftenThanItsDeclaredPeriodShouldStillBeAHotLoop(t *testing.T) {
	spec := recheck(time.Second)
	spec.Periodic = map[string]time.Duration{"ints/k": 30 * time.Second}
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "ints/k reconciled 600 times")
	assert.Contains(t, r.Failure, "at most 23 allowed: 2, and 21 for its declared period of 30s")
	assert.Contains(t, r.Failure, "a hot loop")
}

// heartbeat writes key "hb" of the world's store every period from a
// goroutine of the process, as a node agent's heartbeat does; or the keys
// given, each every period.
func heartbeat(period time.Duration, keys ...string) simtest.Spec[*counters] {
	if len(keys) == 0 {
		keys = []string{"hb"}
	}
	spec := counterSpec(func(*simtest.Process, *counters, informer.Store[string, int]) recFunc {
		return func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }
	})
	process := spec.Process
	spec.Process = func(p *simtest.Process, w *counters) error {
		if err := process(p, w); err != nil {
			return err
		}
		s := simtest.Wrap(p, "ints", w.store)
		p.Go("heartbeat", func(ctx context.Context) error {
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
				for _, k := range keys {
					// A failed beat is retried at the next tick.
					_, _, _ = informer.CreateOrUpdate(ctx, s, k, func(v *int) error { *v++; return nil })
				}
			}
		})
		return nil
	}
	spec.Workload = append(spec.Workload, putK)
	// The count of beats differs from run to run.
	spec.Observe = func(w *counters) any { k, _, _, _ := w.store.Get(context.Background(), "k"); return k }
	return spec
}

func TestAHeartbeatShouldPassOnceItsPeriodIsDeclared(t *testing.T) {
	undeclared := simtest.Check(t, heartbeat(10*time.Second))
	require.NotEmpty(t, undeclared.Failure, "undeclared, a heartbeat never lets the system converge")
	assert.Contains(t, undeclared.Failure, "liveness oracle")

	spec := heartbeat(10 * time.Second)
	// The heartbeat's writes, and the controller's reconciles of them.
	spec.Periodic = map[string]time.Duration{"ints/hb": 10 * time.Second}
	spec.Mode, spec.Seed, spec.Runs = simtest.Sampled, 1, 20
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure)
	assert.Equal(t, 20, r.Schedules)
}

func TestAPrefixShouldGiveEachKeyItCoversItsOwnPeriod(t *testing.T) {
	spec := heartbeat(10*time.Second, "hb-a", "hb-b", "hb-c")
	spec.Periodic = map[string]time.Duration{"ints/hb-*": 10 * time.Second}
	spec.Mode, spec.Seed, spec.Runs = simtest.Sampled, 1, 10
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure, "three heartbeats of one period are not one hot loop")
}

func TestAHeartbeatFasterThanDeclaredShouldBeAHotLoop(t *testing.T) {
	spec := heartbeat(time.Second)
	spec.Periodic = map[string]time.Duration{"ints/hb": 10 * time.Second}
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "ints/hb written 600 times in the 10m0s after it converged (at most 61 for its declared period of 10s): a hot loop")
}

func TestAPanicAtAWriteOutsideAReconcileShouldCrashTheProcessNotTheTest(t *testing.T) {
	if isolated(t, 2*time.Minute) {
		return
	}
	spec := heartbeat(10 * time.Second)
	spec.Periodic = map[string]time.Duration{"ints/hb": 10 * time.Second}
	withSchedule(t, "panic@1")
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, r.FaultPoints)
}

func TestASpecThatCannotRunShouldBeReportedAsSuch(t *testing.T) {
	for want, edit := range map[string]func(*simtest.Spec[*counters]){
		`Spec.Periodic["ints/k"] = 0s: want a name`: func(s *simtest.Spec[*counters]) { s.Periodic = map[string]time.Duration{"ints/k": 0} },
		`Spec.Periodic["*"] = 1s`:                   func(s *simtest.Spec[*counters]) { s.Periodic = map[string]time.Duration{"*": time.Second} },
		"Spec.Observe is nil":                       func(s *simtest.Spec[*counters]) { s.Observe = nil },
	} {
		spec := recheck(time.Second)
		edit(&spec)
		r := simtest.Check(t, spec)
		assert.Contains(t, r.Failure, want)
		assert.Zero(t, r.Schedules)
	}
}
