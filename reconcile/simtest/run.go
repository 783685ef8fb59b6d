package simtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

// resumeWindow is how long a deposed process's work runs after its frozen
// write goes out, before the timers of its Clock fire.
const resumeWindow = time.Second

// invariantError is an invariant found broken inside a settle (right
// after a deposed process's late write), reported by the invariant oracle.
type invariantError string

func (e invariantError) Error() string { return string(e) }

// errBudget stops a run that went past Spec.Budget.
var errBudget = errors.New("simtest: budget exhausted")

// outcome is what one run found.
type outcome struct {
	observed any
	writes   int // writes made by the processes
	faults   int // fault points reached
	log      []writeRecord
	failure  string // "" if every oracle held
	oracle   string // which one failed
}

// execute runs spec once under sched inside a fresh synctest bubble. ref is
// the reference outcome (nil for the reference run itself).
func execute[W any](t *testing.T, spec *Spec[W], sched Schedule, ref *outcome) (out outcome) {
	synctest.Test(t, func(*testing.T) {
		out = drive(spec, sched, ref)
	})
	return out
}

// drive is a run, on the bubble's goroutine.
func drive[W any](spec *Spec[W], sched Schedule, ref *outcome) (out outcome) {
	rs := &runState{crashed: make(chan crash, 1), ended: make(chan struct{}, 1), sched: sched, gate: newGate(), faultAt: map[int]*Fault{}, reconciles: map[string]int{}, budget: spec.Budget}
	for i, f := range sched.Faults {
		if _, taken := rs.faultAt[f.At]; !taken {
			rs.faultAt[f.At] = &sched.Faults[i]
		}
	}
	w := spec.World()
	ctx := context.Background()
	incarnation := 0
	// cur is the newest process; all every process of the run, so that
	// none outlives its bubble whatever went wrong (a deposed process
	// runs beside cur until its depose ends).
	var cur *Process
	var all []*Process
	start := func(lag int) error {
		cur = newProcess(rs, incarnation, lag, spec.StaleFor)
		all = append(all, cur)
		incarnation++
		if err := spec.Process(cur, w); err != nil {
			return fmt.Errorf("process %d: %w", cur.incarnation, err)
		}
		return nil
	}
	fail := func(oracle, format string, args ...any) outcome {
		var inv invariantError
		if len(args) == 1 {
			if err, ok := args[0].(error); ok && errors.As(err, &inv) {
				oracle, format, args = "invariant", "%s", []any{string(inv)}
			}
		}
		if len(args) == 1 && args[0] == errBudget {
			oracle, format, args = "liveness", "more than %d writes or reconciles in one run without virtual time passing, or in all: it never settles", []any{spec.Budget}
		}
		out.oracle, out.failure = oracle, fmt.Sprintf(format, args...)
		return out
	}
	defer func() {
		if cur != nil {
			if err := cur.stop(); err != nil && out.failure == "" {
				out.oracle, out.failure = "process", err.Error()
			}
		}
		for _, p := range all {
			_ = p.stop() // stopped already, unless the run failed
		}
		out.writes, out.log = rs.writeCount(), rs.log
		for _, wr := range rs.log {
			if wr.fault != nil {
				out.faults++
			}
		}
	}()
	// restart replaces the crashed process with a fresh one. A deposed
	// process that crashes or exits only ends: its successor runs.
	restart := func(c crash) error {
		if c.p != cur {
			return c.p.stop()
		}
		if err := cur.stop(); err != nil {
			return err
		}
		cur = nil
		return start(c.lag)
	}
	check := func(when string) string {
		for i, inv := range spec.Invariants {
			if err := inv(w); err != nil {
				return fmt.Sprintf("invariant %d after %s: %v", i, when, err)
			}
		}
		return ""
	}
	// settle waits until everything is blocked, restarting crashed
	// processes, then lets d of virtual time pass the same way.
	var settle func(d time.Duration) error
	var settleUntil func(d time.Duration, cond func() error) error
	// depose runs a successor beside the frozen process c.p, lets the
	// frozen write go once the successor has run DeposeFor, lets the old
	// process's work run on for resumeWindow before its clock's timers
	// catch up (a resumed process's work may run before its watchdog, as
	// the leader package says), checks the invariants, then thaws the old
	// process and lets it end. A process frozen again while it runs on
	// after its first depose has its successor already: it is held as
	// long again beside the processes that run, with no new one.
	depose := func(c crash) error {
		old := c.p
		released, stopped := false, false
		defer func() {
			// On a failure too: nothing of the old process may outlive
			// the run's bubble.
			if !released {
				close(c.release)
			}
			if !stopped {
				_ = old.stop()
			}
		}()
		if old == cur {
			if err := start(0); err != nil {
				return err
			}
		}
		if err := settle(spec.DeposeFor); err != nil {
			return err
		}
		close(c.release)
		released = true
		if err := settle(resumeWindow); err != nil {
			return err
		}
		if f := check("the deposed process's late write"); f != "" {
			return invariantError(f)
		}
		old.unfreeze()
		synctest.Wait()
		stopped = true
		return old.stop()
	}
	handle := func(c crash) error {
		if c.release != nil {
			return depose(c)
		}
		return restart(c)
	}
	settle = func(d time.Duration) error { return settleUntil(d, nil) }
	// settleUntil is settle that, given cond, returns as soon as cond
	// holds when everything is blocked, and if it never does, an error
	// wrapping its last one once d has passed.
	settleUntil = func(d time.Duration, cond func() error) error {
		deadline := time.Now().Add(d)
		var last error
		for {
			synctest.Wait()
			if rs.overBudget() {
				return errBudget
			}
			select {
			case c := <-rs.crashed:
				if err := handle(c); err != nil {
					return err
				}
				continue
			default:
			}
			if rs.gate.next() {
				continue
			}
			if cond != nil {
				if last = cond(); last == nil {
					return nil
				}
			}
			left := time.Until(deadline)
			if left <= 0 {
				if cond != nil {
					return notMet{d: d, err: last}
				}
				return nil
			}
			var ended <-chan struct{}
			if cond != nil {
				ended = rs.ended
			}
			tm := time.NewTimer(left)
			select {
			case <-tm.C:
			case <-rs.gate.arrived:
				tm.Stop()
			case <-ended:
				tm.Stop()
			case c := <-rs.crashed:
				tm.Stop()
				if err := handle(c); err != nil {
					return err
				}
			case <-cur.Context().Done():
				// Crashed, or killed for going past the budget.
				tm.Stop()
				synctest.Wait()
				if rs.overBudget() {
					return errBudget
				}
				// Its notice may have been dropped (the channel holds
				// one): it is the current process that ended.
				c := crash{p: cur}
				select {
				case c = <-rs.crashed:
				default:
				}
				if err := handle(c); err != nil {
					return err
				}
			}
		}
	}
	// await is Await's, for the workload's steps; a failure of the run
	// while a step waits is kept for the oracles, not the step's.
	var awaitErr error
	stepCtx := context.WithValue(ctx, awaitKey{}, func(cond func() error) error {
		if awaitErr != nil {
			return awaitErr
		}
		err := settleUntil(spec.Converge, cond)
		if _, ok := err.(notMet); err != nil && !ok {
			awaitErr = err
		}
		return err
	})

	if err := start(0); err != nil {
		return fail("process", "%v", err)
	}
	for i, step := range spec.Workload {
		if err := settle(spec.StepTime); err != nil {
			return fail("process", "%v", err)
		}
		err := step(stepCtx, w)
		if awaitErr != nil {
			return fail("process", "%v", awaitErr)
		}
		if err != nil {
			return fail("workload", "step %d: %v", i, err)
		}
		if f := check(fmt.Sprintf("step %d", i)); f != "" {
			return fail("invariant", "%s", f)
		}
	}

	// Liveness: converge within spec.Converge, in growing ticks, once the
	// source faults stop. A tick with no write means converged only if it
	// outlasts anything the schedule holds back (a coalescing window, a
	// stale window, the informer's longest backoff after an expiry).
	rs.heal()
	var converged bool
	var waited time.Duration
	first := max(spec.Idle, sched.Coalesce)
	for _, f := range sched.Faults {
		if f.Kind == Stale {
			first = max(first, spec.StaleFor+time.Second)
		}
	}
	if sched.Expire > 0 {
		first = max(first, 31*time.Second) // the informer's default watch backoff cap, and one
	}
	for tick := first; waited < spec.Converge; tick = min(2*tick, max(first, time.Minute)) {
		before := rs.writeCount()
		if err := settle(tick); err != nil {
			return fail("process", "%v", err)
		}
		waited += tick
		if f := check(fmt.Sprintf("%v of liveness", waited)); f != "" {
			return fail("invariant", "%s", f)
		}
		// Stable, not necessarily right: a wrong end state is the
		// differential oracle's to report.
		if len(unplanned(spec.Periodic, rs.writesSince(before))) == 0 && rs.idle() {
			converged = true
			break
		}
	}
	if !converged {
		return fail("liveness", "not converged within %v of virtual time after the workload (%d writes so far)", spec.Converge, rs.writeCount())
	}
	// And stays converged: no write, few reconciles per key.
	before, counts := rs.writeCount(), rs.reconcileCounts()
	if err := settle(spec.Quiet); err != nil {
		return fail("process", "%v", err)
	}
	if f := quietFailure(spec, rs.writesSince(before), counts, rs.reconcileCounts()); f != "" {
		return fail("liveness", "%s", f)
	}
	for i, inv := range spec.Converged {
		if err := inv(w); err != nil {
			return fail("invariant", "converged invariant %d: %v", i, err)
		}
	}
	out.observed = spec.Observe(w)
	if ref != nil && !reflect.DeepEqual(out.observed, ref.observed) {
		return fail("differential", "end state differs from the fault-free run's")
	}
	return out
}
