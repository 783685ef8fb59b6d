package simtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// The deposed-leader sample: a leader copies the desired value of each key
// into an applied record, with the term it led in.
type (
	Desired struct{ N int }
	Applied struct {
		N    int
		Term leader.Term
	}
)

type replicas struct {
	lock    *memlock.Lock
	desired *memstore.Store[string, Desired]
	applied *memstore.Store[string, Applied]
}

// errFenced is what a fenced write returns when a later term has written.
var errFenced = errors.New("fenced: a later term has written")

// applier is the leader's reconciler in one term. Unless fenced (the
// planted bug), a leader frozen in a write (a pause longer than its lease)
// that resumes before it notices it was deposed retries its conflicting
// write on the new leader's record and overwrites it with its old term's
// decision. Fenced, the write checks the term recorded in the object, in
// the same compare-and-swap, and refuses.
type applier struct {
	desired *informer.Informer[string, Desired]
	applied informer.Store[string, Applied]
	term    leader.Term
	fenced  bool
}

func (a *applier) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	d, ok := a.desired.Get(key)
	if !ok {
		return reconcile.Result{}, nil
	}
	_, _, err := informer.CreateOrUpdate(ctx, a.applied, key, func(v *Applied) error {
		if a.fenced && v.Term > a.term {
			return fmt.Errorf("term %d, record at term %d: %w", a.term, v.Term, errFenced)
		}
		v.N, v.Term = d.N, a.term
		return nil
	})
	if errors.Is(err, errFenced) {
		return reconcile.Result{}, nil // deposed: the new leader owns the key
	}
	return reconcile.Result{}, err
}

// termsNeverGoBack replays the applied store's whole history: no key's
// term may go back (a write of a deposed leader after its successor's).
func termsNeverGoBack(w *replicas) error {
	end := w.applied.Revision()
	if end == 0 {
		return nil
	}
	done := errors.New("replayed")
	last := map[string]leader.Term{}
	var broken error
	err := w.applied.Watch(context.Background(), 0, func(ev informer.Event[string, Applied]) error {
		if ev.Type == informer.Put {
			if ev.Value.Term < last[ev.Key] && broken == nil {
				broken = fmt.Errorf("%s went back from term %d to %d at revision %d", ev.Key, last[ev.Key], ev.Value.Term, ev.Revision)
			}
			last[ev.Key] = ev.Value.Term
		}
		if ev.Revision >= end {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		return err
	}
	return broken
}

func replicasSpec(fenced bool) simtest.Spec[*replicas] {
	return simtest.Spec[*replicas]{
		World: func() *replicas {
			return &replicas{lock: memlock.NewLock(),
				desired: must.Do(memstore.New[string, Desired]()), applied: must.Do(memstore.New[string, Applied]())}
		},
		Process: func(p *simtest.Process, w *replicas) error {
			desired := must.Do(informer.New("desired", simtest.Wrap(p, "desired", w.desired), informer.WithLogger(p.Logger())))
			applied := simtest.Wrap(p, "applied", w.applied)
			el, err := leader.New(w.lock, leader.Config{
				Identity: fmt.Sprint("replica-", p.Incarnation()),
				Clock:    p.Clock(), // frozen with the process
				OnStartedLeading: func(ctx context.Context) {
					term, _ := leader.TermFromContext(ctx)
					a := &applier{desired: desired, applied: applied, term: term, fenced: fenced}
					ctrl, err := reconcile.New("applier", simtest.Count(p, "applier", reconcile.Reconciler[string](a)),
						reconcile.For(desired), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
					if err == nil {
						_ = ctrl.Run(ctx)
					}
				},
			})
			if err != nil {
				return err
			}
			p.Go("desired informer", desired.Run)
			p.Go("elector", el.Run)
			return nil
		},
		Workload: []func(context.Context, *replicas) error{
			func(_ context.Context, w *replicas) error { w.desired.Put("x", Desired{N: 1}); return nil },
			func(_ context.Context, w *replicas) error { w.desired.Put("x", Desired{N: 2}); return nil },
		},
		// The values applied; the terms differ with every restart.
		Observe: func(w *replicas) any {
			got := map[string]int{}
			es, _, _ := w.applied.List(context.Background())
			for _, e := range es {
				got[e.Key] = e.Value.N
			}
			return got
		},
		Invariants: []func(*replicas) error{termsNeverGoBack},
		Mode:       simtest.Sampled,
		Seed:       1,
		Kinds:      append([]simtest.Kind{simtest.Depose}, simtest.DefaultKinds...),
		// A successor waits out a crashed leader's lease (15 s) without
		// writing: not yet converged.
		Idle: 20 * time.Second,
	}
}

func TestADeposedLeaderWithoutFencingShouldBeFoundOverwritingItsSuccessor(t *testing.T) {
	spec := replicasSpec(false)
	spec.Runs = 40
	r := findsBug(t, spec, 30, "invariant")
	assert.Contains(t, r.Failure, "went back from term 2 to 1")
	assert.Contains(t, r.Failed.String(), "depose@", "shrunk to a deposed leader")
	// The damage is the deposed leader's retry after its frozen write
	// conflicted, not the frozen write: the report names both, and the
	// fight over the key.
	assert.Contains(t, r.Failure, "froze before it, and made it late")
	assert.Regexp(t, `write \d+ = Update applied/x by reconcile of applier/x \(its write #\d+\); by process 0 after it was deposed`, r.Failure)
	assert.Contains(t, r.Failure, "processes 0 and 1 fought over applied/x: writes ")
}

func TestAFencedLeaderShouldSurviveSampledSchedulesWithDeposedLeaders(t *testing.T) {
	passes(t, replicasSpec(true))
}
