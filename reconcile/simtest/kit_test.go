package simtest_test

import (
	"context"
	"errors"
	"flag"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// counters is a world of one store of ints, and what the reconcilers of
// the kit's own tests saw.
type counters struct {
	store *memstore.Store[string, int]
	// crashedWrites counts writes that failed with ErrCrashed.
	crashedWrites int
	// incarnation is the latest process incarnation that reconciled.
	incarnation int
	// born is when the world was made; deleted when, and with what
	// error, the first process's delete returned (the Depose test).
	born, deleted time.Time
	deleteErr     error
}

// counterSpec runs rec (given the process's wrapped store and informer) over
// a store with key "k" put by the workload.
func counterSpec(rec func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc) simtest.Spec[*counters] {
	return simtest.Spec[*counters]{
		World: func() *counters { return &counters{store: must.Do(memstore.New[string, int]())} },
		Process: func(p *simtest.Process, w *counters) error {
			s := simtest.Wrap(p, "ints", w.store)
			inf := must.Do(informer.New("ints", s, informer.WithLogger(p.Logger())))
			c, err := reconcile.New("ints", simtest.Count(p, "ints", reconcile.Func(rec(p, w, s))),
				reconcile.For(inf), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Go("informer", inf.Run)
			p.Add(c)
			return nil
		},
		Workload: []func(context.Context, *counters) error{func(context.Context, *counters) error { return nil }},
		Observe: func(w *counters) any {
			es, _, _ := w.store.List(context.Background())
			m := map[string]int{}
			for _, e := range es {
				m[e.Key] = e.Value
			}
			return m
		},
	}
}

// putK is a workload step.
func putK(_ context.Context, w *counters) error { w.store.Put("k", 0); return nil }

func TestAControllerThatRequeuesForeverShouldFailLivenessAsAHotLoop(t *testing.T) {
	spec := counterSpec(func(*simtest.Process, *counters, informer.Store[string, int]) recFunc {
		return func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
	})
	spec.Workload = append(spec.Workload, putK)
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "fault-free run fails the liveness oracle")
	assert.Contains(t, r.Failure, "ints/k reconciled")
	assert.Contains(t, r.Failure, "a hot loop")
}

func TestAControllerThatNeverStopsWritingShouldFailLiveness(t *testing.T) {
	spec := counterSpec(func(_ *simtest.Process, _ *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			_, _, err := informer.Update(ctx, s, key, func(v *int) error { *v++; return nil })
			return reconcile.Result{}, err
		}
	})
	spec.Workload = append(spec.Workload, putK)
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "fault-free run fails the liveness oracle")
	assert.Contains(t, r.Failure, "it never settles")
}

func TestABrokenInvariantShouldFailTheRun(t *testing.T) {
	spec := counterSpec(func(*simtest.Process, *counters, informer.Store[string, int]) recFunc {
		return func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }
	})
	spec.Workload = append(spec.Workload, putK)
	spec.Invariants = []func(*counters) error{func(w *counters) error {
		if w.store.Len() > 0 {
			return errors.New("the store is not empty")
		}
		return nil
	}}
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "invariant 0 after step 1: the store is not empty")
}

// twoWrites creates "a" then "b" from every reconcile, each set to the
// writing process's incarnation + 1, counting the writes the kit refused.
func twoWrites(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
	return func(ctx context.Context, _ string) (reconcile.Result, error) {
		for _, k := range []string{"a", "b"} {
			_, err := s.Create(ctx, k, p.Incarnation()+1)
			if errors.Is(err, simtest.ErrCrashed) {
				w.crashedWrites++
				continue // a buggy reconciler that goes on: the kit must stop its writes
			}
			if err != nil && !errors.Is(err, informer.ErrConflict) {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{}, nil
	}
}

func TestAProcessShouldWriteNothingAfterItCrashedAndAFreshOneShouldFinish(t *testing.T) {
	var world *counters
	spec := counterSpec(twoWrites)
	world0 := spec.World
	spec.World = func() *counters { world = world0(); return world }
	spec.Workload = append(spec.Workload, putK)
	// Which process wrote a key may differ from the reference: ignore the
	// values, compare the keys.
	spec.Observe = func(w *counters) any {
		es, _, _ := w.store.List(context.Background())
		keys := []string{}
		for _, e := range es {
			keys = append(keys, e.Key)
		}
		slices.Sort(keys)
		return keys
	}
	require.NoError(t, flag.Set("simtest.schedule", "crash@1"))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })

	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, r.Schedules, "-simtest.schedule runs only that schedule")
	assert.Equal(t, 1, r.FaultPoints)
	// The crashing write and the dead process's next one at least; more if
	// its queue still held a key when it died (a dying controller drains
	// its queue, and the kit refuses every write of it).
	assert.GreaterOrEqual(t, world.crashedWrites, 2)
	assert.Equal(t, 3, world.store.Len(), "k, a and b")
	a, _, _, _ := world.store.Get(t.Context(), "a")
	b, _, _, _ := world.store.Get(t.Context(), "b")
	assert.Equal(t, 1, a, "a: the crashing write committed")
	assert.Equal(t, 2, b, "b: written by the fresh process, not the dead one")
}

func TestSchedulesShouldPrintAsTheFlagReadsThem(t *testing.T) {
	for _, s := range []simtest.Schedule{
		{},
		{Faults: []simtest.Fault{{Kind: simtest.Crash, At: 3}}},
		{Faults: []simtest.Fault{{Kind: simtest.Crash, At: 1}, {Kind: simtest.Stale, At: 7, Arg: 2}, {Kind: simtest.Panic, At: 8}, {Kind: simtest.Ambiguous, At: 9}}},
		{Seed: 5, Coalesce: 2 * time.Second, Duplicate: 0.2, Expire: 0.05},
		simtest.Sample(11, 20),
	} {
		got, err := simtest.ParseSchedule(s.String())
		require.NoError(t, err)
		assert.Equal(t, s.String(), got.String())
	}
	two, err := simtest.ParseSchedule("crash@1,7")
	require.NoError(t, err)
	assert.Equal(t, "crash@1 crash@7", two.String())
	for _, bad := range []string{"", "crash@", "crash@0", "crash@x", "stale@1", "panic@1:2", "boom@1", "coalesce=x", "speed=1"} {
		_, err := simtest.ParseSchedule(bad)
		assert.Error(t, err, bad)
	}
}

func TestTheSameSeedShouldDrawTheSameSchedule(t *testing.T) {
	assert.Equal(t, simtest.Sample(42, 10).String(), simtest.Sample(42, 10).String())
	kinds := map[string]bool{}
	for seed := range uint64(200) {
		s := simtest.Sample(seed, 10)
		require.NotEmpty(t, s.Faults)
		for _, f := range s.Faults {
			require.True(t, f.At >= 1 && f.At <= 10, "%s", s)
			kinds[f.Kind.String()] = true
		}
		if s.Coalesce > 0 {
			kinds["coalesce"] = true
		}
		if s.Duplicate > 0 {
			kinds["dup"] = true
		}
		if s.Expire > 0 {
			kinds["expire"] = true
		}
	}
	assert.Len(t, kinds, 7, "200 seeds draw every kind of fault: %v", kinds)
}

// faultSeen runs the two-writes reconciler of a fresh world under sched
// and returns the world and the report.
func faultSeen(t *testing.T, sched string) (*counters, *simtest.Report) {
	var world *counters
	spec := counterSpec(func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			if key != "k" {
				return reconcile.Result{}, nil
			}
			w.incarnation = p.Incarnation()
			_, err := s.Create(ctx, "a", p.Incarnation()+1)
			if errors.Is(err, context.DeadlineExceeded) {
				w.crashedWrites++ // here: the timeouts seen
			}
			if err != nil && !errors.Is(err, informer.ErrConflict) {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}
	})
	world0 := spec.World
	spec.World = func() *counters { world = world0(); return world }
	spec.Workload = append(spec.Workload, putK)
	require.NoError(t, flag.Set("simtest.schedule", sched))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	return world, simtest.Check(t, spec)
}

func TestAPanicAfterAWriteShouldKeepTheProcessAndItsWrite(t *testing.T) {
	w, r := faultSeen(t, "panic@1")
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, r.FaultPoints)
	a, _, _, _ := w.store.Get(t.Context(), "a")
	assert.Equal(t, 1, a, "written by the first process")
	assert.Equal(t, 0, w.incarnation, "which the panic did not replace: it reconciled again")
}

func TestAnAmbiguousWriteShouldCommitAndReportATimeout(t *testing.T) {
	w, r := faultSeen(t, "ambiguous@1")
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, w.crashedWrites, "the reconciler was told context.DeadlineExceeded")
	assert.Equal(t, 2, w.store.Len(), "k, and a, which committed")
}

func TestTheSeedFlagShouldOverrideTheSpecsSeed(t *testing.T) {
	spec := counterSpec(twoWrites)
	spec.Workload = append(spec.Workload, putK)
	spec.Mode, spec.Seed, spec.Runs = simtest.Sampled, 5, 3
	require.NoError(t, flag.Set("simtest.seed", "77"))
	t.Cleanup(func() { _ = flag.Set("simtest.seed", "0") })
	r := simtest.Check(t, spec)
	assert.Equal(t, uint64(77), r.Seed)
	assert.Equal(t, 3, r.Schedules)
	assert.Contains(t, r.Summary(), "sampled from seed 77")
}

func TestShrinkingShouldKeepOnlyTheFaultThatBreaksTheRun(t *testing.T) {
	// The transient-status bug needs coalescing only: everything else
	// of a drawn schedule goes, and the window halves down to a second.
	spec := jobsSpec(true)
	require.NoError(t, flag.Set("simtest.schedule", "seed=9 crash@1 panic@2 coalesce=4s dup=0.2 expire=0.05"))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Equal(t, "seed=9 coalesce=1s", r.Failed.String())
	assert.Contains(t, r.Failure, "(shrunk from seed=9 crash@1 panic@2 coalesce=4s dup=0.2 expire=0.05)")
}

func TestADeposedProcessShouldMakeItsFrozenWriteAfterItsSuccessorRan(t *testing.T) {
	var world *counters
	// Atomic: the frozen process and its successor reconcile at once.
	var successorRan atomic.Bool
	spec := counterSpec(func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			if p.Incarnation() > 0 {
				successorRan.Store(true)
			}
			if key == "k" && p.Incarnation() == 0 {
				_, w.deleteErr = s.Delete(ctx, "k", 0)
				w.deleted = time.Now()
			}
			return reconcile.Result{}, nil
		}
	})
	world0 := spec.World
	spec.World = func() *counters { world = world0(); world.born = time.Now(); return world }
	spec.Workload = append(spec.Workload, putK)
	require.NoError(t, flag.Set("simtest.schedule", "depose@1"))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.True(t, successorRan.Load(), "the successor ran")
	require.NoError(t, world.deleteErr, "the frozen write was made")
	assert.GreaterOrEqual(t, world.deleted.Sub(world.born), time.Minute, "after DeposeFor")
	assert.Zero(t, world.store.Len())
}

// An effect outside the stores is a crash point like a store write: a
// reconciler that starts something, then records it in the store, starts
// it twice when it dies in between (the kit counts the starts).
func TestAnEffectShouldBeACrashPointLikeAStoreWrite(t *testing.T) {
	spec := counterSpec(func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			if key != "k" {
				return reconcile.Result{}, nil
			}
			if _, _, ok, err := s.Get(ctx, "started"); err != nil || ok {
				return reconcile.Result{}, err
			}
			if err := p.Effect(ctx, "start k", func(context.Context) error { w.crashedWrites++; return nil }); err != nil {
				return reconcile.Result{}, err
			}
			_, err := s.Create(ctx, "started", 1)
			return reconcile.Result{}, err
		}
	})
	spec.Workload = append(spec.Workload, putK)
	spec.Observe = func(w *counters) any { return w.crashedWrites } // here: starts
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	t.Log(r.Failure)
	assert.Equal(t, 2, r.Writes, "the effect and the create")
	assert.Contains(t, r.Failure, "schedule: crash@1")
	assert.Contains(t, r.Failure, "write 1 = start k by reconcile of ints/k")
	assert.Contains(t, r.Failure, "reference 1, this run 2")
}

// findsBug checks spec, a planted bug, and asserts that the kit found it
// within most schedules, with oracle; it returns the report for more.
func findsBug[W any](t *testing.T, spec simtest.Spec[W], most int, oracle string) *simtest.Report {
	t.Helper()
	r := simtest.Check(t, spec)
	t.Log(r.Summary())
	require.NotEmpty(t, r.Failure, "the kit must find the planted bug")
	t.Log(r.Failure)
	assert.LessOrEqual(t, r.Schedules, most, "found within %d schedules", most)
	assert.Contains(t, r.Failure, oracle+" oracle failed")
	return r
}

// passes checks spec, a corrected sample, and asserts every schedule
// passed.
func passes[W any](t *testing.T, spec simtest.Spec[W]) {
	t.Helper()
	r := simtest.Run(t, spec)
	assert.Positive(t, r.Schedules)
}

// recFunc is a reconcile function, which reconcile.Func makes a Reconciler.
type recFunc = func(context.Context, string) (reconcile.Result, error)
