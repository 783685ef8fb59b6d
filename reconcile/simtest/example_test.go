package simtest_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// mirror is the world of the example: desired values, and the copies a
// controller keeps of them.
type mirror struct {
	desired, copies *memstore.Store[string, int]
}

// contents returns a store's keys and values.
func contents(s *memstore.Store[string, int]) map[string]int {
	es, _, _ := s.List(context.Background())
	m := map[string]int{}
	for _, e := range es {
		m[e.Key] = e.Value
	}
	return m
}

// A controller under faults: the kit runs the workload once without
// faults, then again with a crash after each write the controller made
// (Exhaustive mode), and fails the test if a run ends with other copies
// than the fault-free one, breaks an invariant, or never settles. In a
// test file of its own it would be TestMirrorShouldSurviveCrashes; this
// package's tests run it.
func testMirrorShouldSurviveCrashes(t *testing.T) {
	simtest.Run(t, simtest.Spec[*mirror]{
		World: func() *mirror {
			desired, err := memstore.New[string, int]()
			if err != nil {
				t.Fatal(err)
			}
			copies, err := memstore.New[string, int]()
			if err != nil {
				t.Fatal(err)
			}
			return &mirror{desired: desired, copies: copies}
		},
		// One incarnation of the binary, built again after each crash.
		Process: func(p *simtest.Process, w *mirror) error {
			desired, err := informer.New("desired", simtest.Wrap(p, "desired", w.desired), informer.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			copies := simtest.Wrap(p, "copies", w.copies) // writes through it are numbered and crashable
			c, err := reconcile.New("mirror", simtest.Count(p, "mirror", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
				v, ok := desired.Get(key)
				if !ok {
					_, err := copies.Delete(ctx, key, 0)
					return reconcile.Result{}, err
				}
				_, _, err := informer.CreateOrUpdate(ctx, copies, key, func(c *int) error { *c = v; return nil })
				return reconcile.Result{}, err
			})), reconcile.For(desired), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Go("informer", desired.Run)
			p.Add(c)
			return nil
		},
		Workload: []func(context.Context, *mirror) error{
			func(context.Context, *mirror) error { return nil },
			func(_ context.Context, w *mirror) error { w.desired.Put("a", 1); w.desired.Put("b", 2); return nil },
			func(ctx context.Context, w *mirror) error { _, err := w.desired.Delete(ctx, "a", 0); return err },
		},
		Observe: func(w *mirror) any { return contents(w.copies) },
		Converged: []func(*mirror) error{func(w *mirror) error {
			if !maps.Equal(contents(w.copies), contents(w.desired)) {
				return errors.New("the copies differ from the desired values")
			}
			return nil
		}},
	})
}

func ExampleRun() {
	_ = testMirrorShouldSurviveCrashes
}
