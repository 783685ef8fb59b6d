package simtest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// isolated runs the calling test again in a child process of the test
// binary, within timeout, and reports true in the parent, which then has
// nothing more to do; in the child it reports false and the test runs. A
// kit broken in a way that panics a synctest bubble (which ends the whole
// binary) or hangs it (until go test's timeout) then fails this one test,
// with the child's output, instead of taking every other test down.
func isolated(t *testing.T, timeout time.Duration) bool {
	t.Helper()
	const env = "SIMTEST_ISOLATED_CHILD"
	if os.Getenv(env) == t.Name() {
		return false
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v",
		"-test.timeout="+timeout.String())
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the test in a child process:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: "+t.Name())
	return true
}

// withSchedule runs only sched in the Checks of the calling test.
func withSchedule(t *testing.T, sched string) {
	t.Helper()
	require.NoError(t, flag.Set("simtest.schedule", sched))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
}

func TestASecondDeposeOfAnAlreadyDeposedProcessShouldFreezeItAgainAndEndTheRunCleanly(t *testing.T) {
	if isolated(t, 2*time.Minute) {
		return
	}
	var world *counters
	spec := counterSpec(func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			if key != "k" || p.Incarnation() != 0 {
				return reconcile.Result{}, nil
			}
			if _, _, ok, err := s.Get(ctx, "k"); err != nil || !ok {
				return reconcile.Result{}, err
			}
			// Write 1 freezes the process; write 2, its next, is made once
			// it has been deposed, and freezes it a second time.
			if _, err := s.Delete(ctx, "k", 0); err != nil {
				return reconcile.Result{}, err
			}
			_, err := s.Create(ctx, "late", 1)
			return reconcile.Result{}, err
		}
	})
	world0 := spec.World
	spec.World = func() *counters { world = world0(); return world }
	spec.Workload = append(spec.Workload, putK)
	withSchedule(t, "depose@1,2")
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, 2, r.FaultPoints, "both freezes reached")
	late, _, ok, _ := world.store.Get(t.Context(), "late")
	assert.True(t, ok, "the twice-frozen write went out")
	assert.Equal(t, 1, late)
	assert.Equal(t, 1, world.store.Len())
}

// A process run the documented way, a reconcile.Manager with a Lock:
// deposed, its Manager.Run ends with an error wrapping
// reconcile.ErrLeadershipLost, on which a real program exits.
type managed struct {
	lock  *memlock.Lock
	store *memstore.Store[string, int]
}

func managedSpec() simtest.Spec[*managed] {
	return simtest.Spec[*managed]{
		World: func() *managed { return &managed{lock: memlock.NewLock(), store: must.Do(memstore.New[string, int]())} },
		Process: func(p *simtest.Process, w *managed) error {
			s := simtest.Wrap(p, "ints", w.store)
			inf := must.Do(informer.New("ints", s, informer.WithLogger(p.Logger())))
			c, err := reconcile.New("ints", simtest.Count(p, "ints", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
				if key != "k" {
					return reconcile.Result{}, nil
				}
				k, _, _, err := s.Get(ctx, "k")
				if err != nil {
					return reconcile.Result{}, err
				}
				_, _, err = informer.CreateOrUpdate(ctx, s, "seen", func(v *int) error { *v = k + 1; return nil })
				return reconcile.Result{}, err
			})), reconcile.For(inf), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			m, err := reconcile.NewManager(reconcile.ManagerOptions{
				Lock:   w.lock,
				Leader: leader.Config{Identity: fmt.Sprint("replica-", p.Incarnation()), Clock: p.Clock()},
				Logger: p.Logger(),
			})
			if err != nil {
				return err
			}
			if err := m.AddInformer(inf); err != nil {
				return err
			}
			if err := m.AddController(c); err != nil {
				return err
			}
			p.Go("manager", m.Run)
			return nil
		},
		Workload: []func(context.Context, *managed) error{
			func(_ context.Context, w *managed) error { w.store.Put("k", 0); return nil },
			func(_ context.Context, w *managed) error { w.store.Put("k", 1); return nil },
		},
		Observe: func(w *managed) any {
			es, _, _ := w.store.List(context.Background())
			m := map[string]int{}
			for _, e := range es {
				m[e.Key] = e.Value
			}
			return m
		},
		// A successor waits out a crashed leader's lease (15 s).
		Idle: 20 * time.Second,
	}
}

func TestADeposedManagerThatEndsWithLeadershipLostShouldNotFailTheRun(t *testing.T) {
	withSchedule(t, "depose@1")
	r := simtest.Check(t, managedSpec())
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, r.FaultPoints)
}

func TestADeposedManagerShouldPassSampledSchedulesWithDeposesAndCrashes(t *testing.T) {
	spec := managedSpec()
	spec.Mode, spec.Seed, spec.Runs = simtest.Sampled, 1, 60
	spec.Kinds = []simtest.Kind{simtest.Depose, simtest.Crash}
	r := simtest.Run(t, spec)
	assert.Equal(t, 60, r.Schedules)
	twice := 0
	for i := range uint64(60) {
		if s := simtest.Sample(1+i, r.Writes, spec.Kinds...); len(s.Faults) == 2 && s.Faults[0].Kind == simtest.Depose && s.Faults[1].Kind == simtest.Depose {
			twice++
		}
	}
	assert.Positive(t, twice, "some schedules depose twice")
}

func TestAProcessThatExitsOnLeadershipLostShouldBeRestartedLikeACrashedOne(t *testing.T) {
	var world *counters
	spec := counterSpec(func(p *simtest.Process, w *counters, s informer.Store[string, int]) recFunc {
		return func(ctx context.Context, key string) (reconcile.Result, error) {
			w.incarnation = max(w.incarnation, p.Incarnation())
			return reconcile.Result{}, nil
		}
	})
	process := spec.Process
	spec.Process = func(p *simtest.Process, w *counters) error {
		if err := process(p, w); err != nil {
			return err
		}
		if p.Incarnation() == 0 {
			// Its lease lost (a lock that failed to renew, say): it ends as
			// a Manager without Standby does, and a real program exits.
			p.Go("manager", func(ctx context.Context) error {
				time.Sleep(time.Minute)
				return fmt.Errorf("term 1: %w", reconcile.ErrLeadershipLost)
			})
		}
		return nil
	}
	world0 := spec.World
	spec.World = func() *counters { world = world0(); return world }
	spec.Workload = append(spec.Workload, putK)
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, 1, world.incarnation, "a second process reconciled")
}

func TestAnEffectThatWaitsWhileAnotherControllerWritesShouldNotHangTheRun(t *testing.T) {
	if isolated(t, 2*time.Minute) {
		return
	}
	spec := counterSpec(nil)
	spec.Process = func(p *simtest.Process, w *counters) error {
		s := simtest.Wrap(p, "ints", w.store)
		inf := must.Do(informer.New("ints", s, informer.WithLogger(p.Logger())))
		slow := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
			if key != "k" {
				return reconcile.Result{}, nil
			}
			// An action outside the stores that takes a while (a cloud
			// API): virtual time, while the other controller writes.
			return reconcile.Result{}, p.Effect(ctx, "slow call", func(context.Context) error {
				time.Sleep(5 * time.Second)
				return nil
			})
		})
		fast := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
			if key != "k" {
				return reconcile.Result{}, nil
			}
			_, _, err := informer.CreateOrUpdate(ctx, s, "fast", func(v *int) error { *v = 1; return nil })
			return reconcile.Result{}, err
		})
		for name, rec := range map[string]reconcile.Reconciler[string]{"a-slow": slow, "b-fast": fast} {
			c, err := reconcile.New(name, simtest.Count(p, name, rec), reconcile.For(inf),
				reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Add(c)
		}
		p.Go("informer", inf.Run)
		return nil
	}
	spec.Workload = append(spec.Workload, putK)
	withSchedule(t, "crash@2")
	r := simtest.Check(t, spec)
	require.Empty(t, r.Failure)
	assert.Equal(t, 2, r.Writes, "the effect and the write")
}
