package simtest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// awaitKey carries the driver's Await in a workload step's context.
type awaitKey struct{}

// Await, called from a workload step with the context the kit passed it,
// lets the system run until cond returns nil, and returns nil then. The
// kit does meanwhile what it does between steps: restarts crashed
// processes, lets events and reconciles through, applies the schedule's
// faults, and lets virtual time pass; it checks cond each time everything
// is blocked. If cond has not held within Spec.Converge of virtual time,
// Await returns an error wrapping cond's last one, which the step should
// return: the workload oracle reports it.
//
// A step runs once every process is blocked and nothing waits at the
// kit's gate (and StepTime has passed), not once the controllers have
// acted on the step before: a coalescing window or a stale restart may
// still hold that step's events back, which is the fault. A step that
// must come after the controllers acted (the user reacts to a status)
// waits for it with Await. Outside a step Await returns an error at once.
func Await(ctx context.Context, cond func() error) error {
	await, ok := ctx.Value(awaitKey{}).(func(func() error) error)
	if !ok {
		return errors.New("simtest: Await called outside a workload step (pass it the step's context)")
	}
	return await(cond)
}

// notMet is Await's error when cond never held.
type notMet struct {
	d   time.Duration
	err error
}

func (e notMet) Error() string {
	return fmt.Sprintf("simtest: Await: the condition did not hold within %v of virtual time: %v", e.d, e.err)
}

func (e notMet) Unwrap() error { return e.err }
