package reconciletest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The package example's test must pass, as any other.
func TestTheExampleShouldPass(t *testing.T) { testAppShouldRunItsReplicasAfterARetry(t) }

// A reconciler that writes back to the store (a status, say) causes more
// reconciles; Settle waits for all of them, not just the first.
func TestSettleWaitsForReconcilesThatWriteToTheStore(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	var calls atomic.Int32
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		calls.Add(1)
		if v, _, _, _ := store.Get(context.Background(), key); v < 10 {
			store.Put(key, v+1) // one step at a time, each a new change
		}
		return reconcile.Result{}, nil
	})
	inf := reconciletest.Informer(h, "counters", store)
	reconciletest.Controller(h, "counters", rec, reconcile.For(inf))
	store.Put("a", 0)
	h.Settle()
	v, _, _, _ := store.Get(context.Background(), "a")
	assert.Equal(t, 10, v)
	assert.Equal(t, int32(11), calls.Load())
}

func TestStepFiresWhatIsDueAndSettles(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 0)
	var calls atomic.Int32
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	})
	inf := reconciletest.Informer(h, "a", store)
	reconciletest.Controller(h, "a", rec, reconcile.For(inf))
	h.Settle()
	assert.Equal(t, int32(1), calls.Load())
	h.Step(30 * time.Second)
	assert.Equal(t, int32(1), calls.Load())
	h.Step(30 * time.Second)
	assert.Equal(t, int32(2), calls.Load())
}

// counter is a reconciler that counts its calls per key and records what
// the two informers held for the key at each call.
type counter struct {
	specs, extras *informer.Informer[string, int]

	mu    sync.Mutex
	calls map[string]int
	seen  []string // "spec/extra" per call, in call order
}

func (c *counter) Reconcile(_ context.Context, key string) (reconcile.Result, error) {
	spec, _ := c.specs.Get(key)
	extra, _ := c.extras.Get(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[key]++
	c.seen = append(c.seen, fmt.Sprintf("%d/%d", spec, extra))
	return reconcile.Result{}, nil
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

// twoInformers is a controller fed by two stores whose changes map to the
// same key: one through For, one through Watch.
func twoInformers(t *testing.T) (*reconciletest.Harness, *memstore.Store[string, int], *memstore.Store[string, int], *counter) {
	h := reconciletest.New(t)
	specs := must.Do(memstore.New[string, int]())
	extras := must.Do(memstore.New[string, int]())
	c := &counter{calls: map[string]int{}}
	c.specs = reconciletest.Informer(h, "specs", specs)
	c.extras = reconciletest.Informer(h, "extras", extras)
	reconciletest.Controller(h, "c", c, reconcile.For(c.specs),
		reconcile.Watch(c.extras, func(k string, _ int) []string { return []string{k} }))
	h.Settle()
	return h, specs, extras, c
}

// Two writes, in two stores or one, to what maps to one key: two reconciles,
// in every run. Before Settle held the changes, the second change reached
// the queue either before a worker took the key (one reconcile) or after
// (two), as the goroutines happened to run: 4 runs in 30 gave one.
func TestTwoWritesForOneKeyAreTwoReconcilesInEveryRun(t *testing.T) {
	h, specs, extras, c := twoInformers(t)
	for i := 1; i <= 10; i++ {
		specs.Put("a", i)
		extras.Put("a", i)
		h.Settle()
		require.Equal(t, 2*i, c.count("a"), "after round %d", i)
	}
	specs.Put("b", 1)
	specs.Put("b", 2)
	h.Settle()
	assert.Equal(t, 2, c.count("b"), "two writes to one store")
}

// Held changes reach the informers in the order the informers were
// created, so what a reconcile sees is the same in every run too, even when
// the test wrote the stores the other way round.
func TestHeldChangesAreReleasedInInformerOrder(t *testing.T) {
	h, specs, extras, c := twoInformers(t)
	extras.Put("a", 7)
	specs.Put("a", 1)
	h.Settle()
	assert.Equal(t, []string{"1/0", "1/7"}, c.seen)
}

// A reconcile that waits for a later change (here: until the informer has
// key "go") keeps its controller busy, so the change would be held for
// ever; Settle lets it through once the controller has been busy for a
// while.
func TestSettleReleasesAChangeAReconcileWaitsFor(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	inf := reconciletest.Informer(h, "keys", store)
	var calls atomic.Int32
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		calls.Add(1)
		for key == "wait" {
			if _, ok := inf.Get("go"); ok {
				break
			}
			select {
			case <-ctx.Done():
				return reconcile.Result{}, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return reconcile.Result{}, nil
	})
	reconciletest.Controller(h, "keys", rec, reconcile.For(inf))
	store.Put("wait", 1)
	store.Put("go", 1)
	h.Settle()
	assert.Equal(t, int32(2), calls.Load())
}

// A test that waits for a reconcile by other means than Settle still gets
// it: a change nobody settles is released after a short while.
func TestAChangeIsReleasedWithoutSettleAfterAWhile(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	var calls atomic.Int32
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{}, nil
	})
	inf := reconciletest.Informer(h, "keys", store)
	reconciletest.Controller(h, "keys", rec, reconcile.For(inf))
	h.Settle()
	store.Put("a", 1)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 10*time.Second, time.Millisecond)
}

// A controller the test built itself, with the harness's options, runs
// on the harness: Settle waits for it and Step moves its clock.
func TestAddRunsAControllerBuiltByTheTest(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	var calls atomic.Int32
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	})
	inf := reconciletest.Informer(h, "keys", store)
	c, err := reconcile.New("mine", rec, append(h.Options(), reconcile.For(inf))...)
	require.NoError(t, err)
	h.Add(c)
	store.Put("a", 1)
	h.Settle()
	assert.Equal(t, int32(1), calls.Load())
	h.Step(time.Minute)
	assert.Equal(t, int32(2), calls.Load())
}

// outputTB is a testing.TB whose Output the test reads.
type outputTB struct {
	testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *outputTB) Output() io.Writer { return o }

func (o *outputTB) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *outputTB) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Controllers and informers log to the test's output, so that a failing
// reconcile shows up under the test it belongs to.
func TestLogsGoToTheTestsOutput(t *testing.T) {
	tb := &outputTB{TB: t}
	h := reconciletest.New(tb)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.Terminal(errors.New("impossible"))
	})
	inf := reconciletest.Informer(h, "keys", store)
	reconciletest.Controller(h, "keys", rec, reconcile.For(inf))
	h.Settle()
	out := tb.String()
	assert.Contains(t, out, "level=ERROR")
	assert.Contains(t, out, "controller=keys key=a")
	assert.Contains(t, out, "impossible")
	assert.NotContains(t, out, "time=", "the real time says nothing on the fake clock")
}

// A resync that Step fires is delivered by the informer's own goroutine;
// Settle waits until the informer has taken the tick.
func TestStepWaitsForTheResyncItFires(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	for _, k := range []string{"a", "b", "c"} {
		store.Put(k, 1)
	}
	var calls atomic.Int32
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{}, nil
	})
	inf := reconciletest.Informer(h, "keys", store, informer.WithResync(time.Minute))
	reconciletest.Controller(h, "keys", rec, reconcile.For(inf))
	h.Settle()
	require.Equal(t, int32(3), calls.Load())
	for i := 2; i <= 4; i++ {
		h.Step(time.Minute)
		require.Equal(t, int32(3*i), calls.Load(), "after resync %d", i-1)
	}
}

// parentChild reconciles a parent by creating its child, named like it, if
// the child informer does not have it, and records the create with
// reconcile.Wrote; Owns maps the child back to its parent.
type parentChild struct {
	h        *reconciletest.Harness
	c        *reconcile.Controller[string]
	parents  *memstore.Store[string, int]
	children *memstore.Store[string, int]
	childInf *informer.Informer[string, int]

	mu    sync.Mutex
	calls map[string]int
	dups  int
	trace []string
}

func (p *parentChild) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	_, has := p.childInf.Get(key)
	p.mu.Lock()
	p.calls[key]++
	p.trace = append(p.trace, fmt.Sprint(key, " child=", has, " rev=", p.childInf.LastRevision()))
	p.mu.Unlock()
	if has {
		return reconcile.Result{}, nil
	}
	rev, err := p.children.Create(ctx, key, 1)
	if errors.Is(err, informer.ErrConflict) {
		p.mu.Lock()
		p.dups++
		p.mu.Unlock()
		return reconcile.Result{}, nil
	}
	reconcile.Wrote(ctx, p.childInf, rev)
	return reconcile.Result{}, err
}

// A parent written twice: the first reconcile creates the child, the second
// write reaches the controller while the child is held (the parents'
// informer was made first), so the key is parked; Settle counts it as
// waiting, releases the child, and the gate's wake-up reconciles the parent
// once more. The same counts in every round: two reconciles, one skip, no
// duplicate.
func TestSettleIsDeterministicWithAParkedKey(t *testing.T) {
	p, skipped := parkedRounds(t, false)
	for i := 1; i <= 30; i++ {
		calls := p.round(t, i)
		require.Equal(t, 2, calls, "round %d: %v", i, p.trace)
		require.Equal(t, float64(i), skipped(), "round %d", i)
	}
}

// With Owns too, the child's change also queues the parent. The gate's
// wake-up waits until the controller's handlers have been given that
// change (Registration.AfterRevision), so the change queues the parent
// first and the wake-up finds it queued: the same two reconciles as without
// Owns, in every round, and never a duplicate child.
func TestSettleWithAParkedKeyThatOwnsAlsoQueuesIsDeterministic(t *testing.T) {
	p, skipped := parkedRounds(t, true)
	for i := 1; i <= 30; i++ {
		calls := p.round(t, i)
		require.Equal(t, 2, calls, "round %d: %v", i, p.trace)
		require.Equal(t, float64(i), skipped(), "round %d", i)
	}
}

func parkedRounds(t *testing.T, owns bool) (*parentChild, func() float64) {
	h := reconciletest.New(t)
	parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, int]())
	parentInf := reconciletest.Informer(h, "parents", parents)
	p := &parentChild{h: h, parents: parents, children: children, calls: map[string]int{}}
	p.childInf = reconciletest.Informer(h, "children", children)
	reg := prometheus.NewRegistry()
	opts := []reconcile.Option{reconcile.For(parentInf), reconcile.WithMetrics(reg)}
	if owns {
		opts = append(opts, reconcile.Owns(p.childInf, func(key string, _ int) (string, bool) { return key, true }))
	}
	p.c = reconciletest.Controller(h, "parents", p, opts...)
	h.Settle()
	return p, func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "converge_read_your_writes_skips_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
}

// round writes parent i twice, settles, and returns how many reconciles
// parent i had.
func (p *parentChild) round(t *testing.T, i int) int {
	key := fmt.Sprint("p", i)
	p.parents.Put(key, 1)
	p.parents.Put(key, 2)
	p.h.Settle()
	require.True(t, p.c.Idle())
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Zero(t, p.dups, "round %d: %v", i, p.trace)
	return p.calls[key]
}
