package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// Thing is the controller's value: desired Size, and the status it
// reports. It embeds object.Meta for its generation and finalizers.
type Thing struct {
	object.Meta
	Size   int         `json:"size"`
	Status ThingStatus `json:"status,omitzero"`
}

// ThingStatus is what the controller observed.
type ThingStatus struct {
	Size       int                `json:"size,omitempty"`
	Conditions []object.Condition `json:"conditions,omitempty"`
}

// thingFinalizer guards the external resource: the key is not deleted
// before the controller has removed it.
const thingFinalizer = "things.converge.dev/external"

// external is the fake system the controller provisions: one resource of
// a size per Thing. It records what exists, so a test can see orphans.
type external struct {
	mu        sync.Mutex
	resources map[string]int
}

func newExternal() *external { return &external{resources: map[string]int{}} }

// ensure creates or resizes name's resource.
func (e *external) ensure(name string, size int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resources[name] = size
}

// remove deletes name's resource; no-op if there is none.
func (e *external) remove(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.resources, name)
}

// snapshot returns every resource and its size.
func (e *external) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.resources)
}

// thingController provisions one external resource per Thing. It reads
// Things from its informer's cache and writes only through informer.Update,
// so it runs unchanged on any informer.Store.
type thingController struct {
	store informer.Store[string, Thing]
	inf   *informer.Informer[string, Thing]
	ext   *external
	ctrl  *reconcile.Controller[string]
	// finalizer: add thingFinalizer before provisioning. false is the
	// control that shows deletions missed while down leave orphans.
	finalizer bool
	// lastWrite is the highest revision the controller wrote, so that a
	// test can wait until the informer has seen its own writes.
	lastWrite atomic.Uint64
}

// quiet discards logs: the tests check state, not log lines.
var quiet = slog.New(slog.DiscardHandler)

// newThingController returns the controller over a new informer of store.
func newThingController(t *testing.T, store informer.Store[string, Thing], ext *external, finalizer bool) *thingController {
	t.Helper()
	c := &thingController{store: store, ext: ext, finalizer: finalizer}
	c.inf = must.Do(informer.New("things", store, informer.WithLogger(quiet)))
	ctrl, err := reconcile.New("things", reconcile.Func(c.reconcile),
		reconcile.For(c.inf), reconcile.WithWorkers(2), reconcile.WithLogger(quiet))
	require.NoError(t, err)
	c.ctrl = ctrl
	return c
}

// reconcile converges one Thing's external resource and status.
func (c *thingController) reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	th, ok := c.inf.Get(name)
	if !ok {
		// Gone, seen while running: clean up. A deletion made while the
		// controller was down never gets here (the key is not listed):
		// that is what the finalizer is for.
		c.ext.remove(name)
		return reconcile.Result{}, nil
	}
	if th.Deleting() {
		c.ext.remove(name)
		if th.HasFinalizer(thingFinalizer) {
			// The last finalizer's removal deletes the key.
			err := c.update(ctx, name, func(t *Thing) error { t.RemoveFinalizer(thingFinalizer); return nil })
			if errors.Is(err, informer.ErrNotFound) {
				err = nil
			}
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
	if c.finalizer && !th.HasFinalizer(thingFinalizer) {
		// Before the first external action, so that no deletion goes
		// unseen.
		if err := c.update(ctx, name, func(t *Thing) error { t.AddFinalizer(thingFinalizer); return nil }); err != nil {
			return reconcile.Result{}, err
		}
	}
	c.ext.ensure(name, th.Size)
	err := c.update(ctx, name, func(t *Thing) error {
		t.Status.Size = th.Size
		object.SetCondition(&t.Status.Conditions, object.Condition{
			Type: "Ready", Status: object.ConditionTrue, Reason: "Provisioned",
			ObservedGeneration: th.Generation,
		}, time.Now())
		return nil
	})
	return reconcile.Result{}, err
}

// update is informer.Update on the controller's store, recording the
// revision written.
func (c *thingController) update(ctx context.Context, name string, mutate func(*Thing) error) error {
	rev, op, err := informer.Update(ctx, c.store, name, mutate)
	if err == nil && op != informer.Unchanged {
		for {
			last := c.lastWrite.Load()
			if uint64(rev) <= last || c.lastWrite.CompareAndSwap(last, uint64(rev)) {
				break
			}
		}
	}
	return err
}

// running is a started controller and its informer.
type running struct {
	c      *thingController
	cancel context.CancelFunc
	done   chan error // one result per goroutine
}

// start runs the informer and the controller until stop (or the test's
// end).
func (c *thingController) start(t *testing.T) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 2)}
	go func() { r.done <- c.inf.Run(ctx) }()
	go func() { r.done <- c.ctrl.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops both and checks that they returned without error. Stopping
// twice is a no-op.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.done == nil {
		return
	}
	r.cancel()
	for range 2 {
		select {
		case err := <-r.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("informer or controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("informer or controller did not stop within 30s")
		}
	}
	r.done = nil
}

// settleTimeout bounds every wait for convergence.
const settleTimeout = 30 * time.Second

// settle waits until done returns nil, the controller is idle and its informer
// has seen every write the controller made. Polling, every millisecond and
// bounded by settleTimeout, is unavoidable here: Idle and the external
// system announce nothing, and on etcd the watch delivers asynchronously.
// Waiting for the informer's revision blocks without polling.
func (r *running) settle(t *testing.T, what string, done func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for {
		last := informer.Revision(r.c.lastWrite.Load())
		require.NoError(t, r.c.inf.WaitForRevision(ctx, last), "%s: the informer never saw the controller's write at %d", what, last)
		err := done()
		if err == nil && r.c.ctrl.Idle() && r.c.lastWrite.Load() == uint64(last) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not settled within %v: %v (idle %v); external %v", what, settleTimeout, err, r.c.ctrl.Idle(), r.c.ext.snapshot())
		case <-time.After(time.Millisecond):
		}
	}
}

// converged reports whether every key in want exists with its Size, its
// status reports that size and its generation, and the external system
// holds exactly want's resources (live is the keys, with their sizes, that
// must have resources; orphans are tolerated only if allowOrphans).
func converged(ctx context.Context, store informer.Store[string, Thing], ext *external, want map[string]int, allowOrphans bool) error {
	for name, size := range want {
		th, _, ok, err := store.Get(ctx, name)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("%s: absent", name)
		case th.Size != size || th.Status.Size != size:
			return fmt.Errorf("%s: size %d, status %d, want %d", name, th.Size, th.Status.Size, size)
		}
		c, ok := object.FindCondition(th.Status.Conditions, "Ready")
		if !ok || c.Status != object.ConditionTrue || c.ObservedGeneration != th.Generation {
			return fmt.Errorf("%s: Ready %+v at generation %d", name, c, th.Generation)
		}
	}
	got := ext.snapshot()
	for name, size := range want {
		if got[name] != size {
			return fmt.Errorf("external %s: size %d, want %d", name, got[name], size)
		}
	}
	if !allowOrphans && len(got) != len(want) {
		return fmt.Errorf("external holds %d resources, want %d", len(got), len(want))
	}
	return nil
}
