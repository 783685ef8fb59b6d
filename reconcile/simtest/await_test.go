package simtest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// observed is a world whose controller records each value of key "k" it
// reconciles, and copies it to key "copy".
type observed struct {
	store *memstore.Store[string, int]
	mu    sync.Mutex
	seen  []int // guarded by mu
}

func observedSpec(steps ...func(context.Context, *observed) error) simtest.Spec[*observed] {
	return simtest.Spec[*observed]{
		World: func() *observed { return &observed{store: must.Do(memstore.New[string, int]())} },
		Process: func(p *simtest.Process, w *observed) error {
			s := simtest.Wrap(p, "ints", w.store)
			inf := must.Do(informer.New("ints", s, informer.WithLogger(p.Logger())))
			c, err := reconcile.New("ints", simtest.Count(p, "ints", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
				v, ok := inf.Get(key)
				if key != "k" || !ok {
					return reconcile.Result{}, nil
				}
				w.mu.Lock()
				if len(w.seen) == 0 || w.seen[len(w.seen)-1] != v {
					w.seen = append(w.seen, v)
				}
				w.mu.Unlock()
				_, _, err := informer.CreateOrUpdate(ctx, s, "copy", func(c *int) error { *c = v; return nil })
				return reconcile.Result{}, err
			})), reconcile.For(inf), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Go("informer", inf.Run)
			p.Add(c)
			return nil
		},
		Workload: steps,
		Observe: func(w *observed) any {
			w.mu.Lock()
			defer w.mu.Unlock()
			// The values seen, not how often: a restart sees one again.
			seen := slices.Clone(w.seen)
			slices.Sort(seen)
			return slices.Compact(seen)
		},
	}
}

func putStep(v int) func(context.Context, *observed) error {
	return func(_ context.Context, w *observed) error { w.store.Put("k", v); return nil }
}

// copied is a condition: the controller has copied v.
func copied(w *observed, v int) func() error {
	return func() error {
		if c, _, _, _ := w.store.Get(context.Background(), "copy"); c != v {
			return fmt.Errorf("copy is %d, not %d", c, v)
		}
		return nil
	}
}

func TestAStepShouldRunOnceEverythingIsBlockedEvenIfAWindowStillHoldsTheStepBefore(t *testing.T) {
	// What "settled" means, and why Await exists: a coalescing window
	// holds step 0's change past the start of step 1, so the controller
	// never sees 1.
	withSchedule(t, "seed=1 coalesce=5s")
	r := simtest.Check(t, observedSpec(putStep(1), putStep(2)))
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "reference [1 2], this run [2]")
}

func TestAStepThatAwaitsTheControllersShouldComeAfterThemUnderEverySchedule(t *testing.T) {
	spec := observedSpec(putStep(1), func(ctx context.Context, w *observed) error {
		if err := simtest.Await(ctx, copied(w, 1)); err != nil {
			return err
		}
		w.store.Put("k", 2)
		return nil
	})
	withSchedule(t, "seed=1 coalesce=5s")
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure)

	// And under sampled schedules, crashes included.
	require.NoError(t, flagSet("simtest.schedule", ""))
	spec.Mode, spec.Seed, spec.Runs = simtest.Sampled, 1, 100
	r = simtest.Run(t, spec)
	assert.Equal(t, 100, r.Schedules)
}

func TestAnAwaitThatNeverHoldsShouldFailTheStepWithItsCondition(t *testing.T) {
	spec := observedSpec(putStep(1), func(ctx context.Context, w *observed) error {
		return simtest.Await(ctx, copied(w, 7))
	})
	r := simtest.Check(t, spec)
	require.NotEmpty(t, r.Failure)
	assert.Contains(t, r.Failure, "fault-free run fails the workload oracle: step 1: simtest: Await: the condition did not hold within 10m0s of virtual time: copy is 1, not 7")
}

func TestAwaitOutsideAStepShouldReturnAnError(t *testing.T) {
	err := simtest.Await(context.Background(), func() error { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside a workload step")
	assert.False(t, errors.Is(err, context.Canceled))
}

func flagSet(name, value string) error { return flag.Set(name, value) }
