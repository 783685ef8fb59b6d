package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/faults"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// Child ops a parent's value asks its reconcile for: value%3.
const (
	opUpsert = iota // create the child, or update it
	opDelete        // delete it if it exists
	opNothing
	ops
)

// rywReconciler writes each parent's child as the parent's value says,
// records every write with Wrote, and checks the gate's promise: a
// reconcile of a key starts with the child informer at or past every
// revision an earlier reconcile of that key recorded.
type rywReconciler struct {
	parentInf *informer.Informer[string, int]
	children  *memstore.Store[string, int]
	childInf  *informer.Informer[string, int]

	mu         sync.Mutex
	recorded   map[string]informer.Revision // highest revision recorded per key
	violations []string
	calls      int
}

func (r *rywReconciler) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	seen := r.childInf.LastRevision()
	r.mu.Lock()
	r.calls++
	if want := r.recorded[key]; seen < want {
		r.violations = append(r.violations, fmt.Sprintf("reconcile of %s saw the child informer at %d, an earlier reconcile wrote at %d", key, seen, want))
	}
	r.mu.Unlock()

	v, ok := r.parentInf.Get(key)
	if !ok {
		return reconcile.Result{}, nil
	}
	child := key + "/child"
	old, rev, exists, err := r.children.Get(ctx, child)
	if err != nil {
		return reconcile.Result{}, err
	}
	switch v % ops {
	case opUpsert:
		if exists {
			rev, err = r.children.Update(ctx, child, old+1, rev)
		} else {
			rev, err = r.children.Create(ctx, child, 1)
		}
	case opDelete:
		if !exists {
			return reconcile.Result{}, nil
		}
		rev, err = r.children.Delete(ctx, child, rev)
	default:
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err // only one reconcile of key writes child: not expected
	}
	reconcile.Wrote(ctx, r.childInf, rev)
	r.mu.Lock()
	r.recorded[key] = max(r.recorded[key], rev)
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

var quietInformer = informer.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// liveBound bounds, in real time, how long the controller may take to
// settle once the faults have healed: the informer's watch backoff is
// capped at 10 ms here, so this is far more than enough.
const liveBound = 10 * time.Second

// TestReadYourWritesHoldsUnderChildInformerFaults: random parent writes,
// each reconcile writing the parent's child through a store whose
// informer suffers random delays, dropped watches, expiries and
// duplicates, on 1-4 workers. Safety: no reconcile of a key sees the child
// informer behind a revision an earlier reconcile of that key wrote (the
// timeout, an hour, is never reached). Liveness: once the faults heal, the
// controller is idle with no key waiting within liveBound.
func TestReadYourWritesHoldsUnderChildInformerFaults(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.IntRange(1, 4).Draw(rt, "workers")
		nKeys := rapid.IntRange(1, 4).Draw(rt, "keys")
		rates := faults.Rates{
			WatchError: rapid.Float64Range(0, 0.1).Draw(rt, "drop"),
			Expire:     rapid.Float64Range(0, 0.05).Draw(rt, "expire"),
			Duplicate:  rapid.Float64Range(0, 0.3).Draw(rt, "duplicate"),
			Delay:      rapid.Float64Range(0, 0.6).Draw(rt, "delay"),
			MaxDelay:   2 * time.Millisecond,
		}
		seed := rapid.Uint64().Draw(rt, "seed")
		writes := rapid.SliceOfN(rapid.IntRange(0, nKeys*ops-1), 1, 40).Draw(rt, "writes")

		parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, int]())
		src := must.Do(faults.New[string, int](children, seed, faults.WithRates(rates)))
		parentInf := must.Do(informer.New("parents", parents, quietInformer))
		childInf := must.Do(informer.New("children", informer.Source[string, int](src), quietInformer,
			informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, Jitter: backoff.FullJitter})))
		rec := &rywReconciler{parentInf: parentInf, children: children, childInf: childInf, recorded: map[string]informer.Revision{}}
		reg := newRegistry()
		c, err := reconcile.New("parents", rec, quiet, reconcile.WithMetrics(reg), reconcile.WithWorkers(workers),
			reconcile.For(parentInf), reconcile.Owns(childInf, func(key string, _ int) (string, bool) { return key[:len(key)-len("/child")], true }),
			reconcile.WithReadYourWritesTimeout(time.Hour))
		require.NoError(rt, err)
		stop := runAll(parentInf.Run, childInf.Run, c.Run)
		defer stop()
		require.NoError(rt, parentInf.WaitForSync(context.Background()))

		for i, w := range writes {
			parents.Put(fmt.Sprint("k", w/ops), i*ops+w%ops)
			runtime.Gosched()
		}
		src.Heal()

		value := func(name string) float64 { return reg.value(t, name, map[string]string{"controller": "parents"}) }
		deadline := time.Now().Add(liveBound)
		for !(parentInf.LastRevision() == parents.Revision() && childInf.LastRevision() == children.Revision() &&
			c.Idle() && value("converge_read_your_writes_waiting") == 0) {
			if time.Now().After(deadline) {
				rt.Fatalf("not idle with no key waiting %v after the faults healed: waiting %v, child informer at %d of %d",
					liveBound, value("converge_read_your_writes_waiting"), childInf.LastRevision(), children.Revision())
			}
			time.Sleep(time.Millisecond) // real goroutines on real time: nothing to step
		}
		stop()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		assert.Empty(rt, rec.violations)
		assert.Zero(rt, value("converge_read_your_writes_timeouts_total"))
		assert.Zero(rt, value("controller_runtime_reconcile_errors_total"))
	})
}

// runAll runs each fn on its own goroutine with one context, and returns
// a stop that cancels it and waits for them all; calling stop again does
// nothing.
func runAll(fns ...func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() { _ = fn(ctx) })
	}
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// TestAnInformerThatNeverCatchesUpGivesOneTimeoutPerKeyThenAReconcile: every
// key parked behind an informer that never moves is reconciled once when
// the timeout passes, with one timeout counted per key, whatever the
// number of workers.
func TestAnInformerThatNeverCatchesUpGivesOneTimeoutPerKeyThenAReconcile(t *testing.T) {
	for _, workers := range []int{1, 4} {
		for _, keys := range []int{1, 5} {
			t.Run(fmt.Sprintf("workers=%d/keys=%d", workers, keys), func(t *testing.T) {
				h := reconciletest.New(t)
				parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, string]())
				parentInf := reconciletest.Informer(h, "parents", parents)
				childInf := must.Do(informer.New("children", informer.Source[string, string](stuckSource{children}), quietInformer))
				runInformer(t, childInf)
				rec := newCreator(children, childInf)
				reg := newRegistry()
				reconciletest.Controller(h, "parents", rec, reconcile.For(parentInf), reconcile.WithMetrics(reg),
					reconcile.WithWorkers(workers), reconcile.WithReadYourWritesTimeout(time.Minute), quiet)
				names := make([]string, keys)
				for i := range names {
					names[i] = fmt.Sprint("k", i)
					parents.Put(names[i], 1)
					parents.Put(names[i], 2)
				}
				h.Settle()
				h.Step(time.Minute)
				h.Step(time.Hour) // nothing more: no second timeout, no loop
				for _, k := range names {
					assert.Equal(t, []bool{false, false}, rec.seen(k), k)
				}
				assert.Equal(t, float64(keys), rywMetric(t, reg, "converge_read_your_writes_timeouts_total"))
				assert.Equal(t, float64(keys), rywMetric(t, reg, "converge_read_your_writes_skips_total"))
				assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_waiting"))
				_, dups := rec.counts()
				assert.Equal(t, keys, dups)
			})
		}
	}
}
