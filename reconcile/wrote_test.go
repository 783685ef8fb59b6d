package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// creator reconciles a parent by creating its one child, named like it,
// if its informer does not show one, and records the write with
// reconcile.Wrote. A create that conflicts is a duplicate: the reconcile
// acted on a view that lacked its own earlier write.
type creator struct {
	children *memstore.Store[string, string]
	childInf *informer.Informer[string, string]
	// revs is what Wrote is given for childInf: childInf itself unless a
	// test wraps it.
	revs informer.Revisioned

	mu       sync.Mutex
	sawChild map[string][]bool // per reconcile of a parent: child cached?
	creates  int
	dups     int
}

func newCreator(children *memstore.Store[string, string], childInf *informer.Informer[string, string]) *creator {
	return &creator{children: children, childInf: childInf, revs: childInf, sawChild: map[string][]bool{}}
}

func (c *creator) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	_, has := c.childInf.Get(key)
	c.mu.Lock()
	c.sawChild[key] = append(c.sawChild[key], has)
	c.mu.Unlock()
	if has {
		return reconcile.Result{}, nil
	}
	rev, err := c.children.Create(ctx, key, "child of "+key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, informer.ErrConflict) {
		c.dups++
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	c.creates++
	reconcile.Wrote(ctx, c.revs, rev)
	return reconcile.Result{}, nil
}

func (c *creator) seen(key string) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.sawChild[key]...)
}

func (c *creator) counts() (creates, dups int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates, c.dups
}

// countingRevisioned counts AfterRevision registrations.
type countingRevisioned struct {
	*informer.Informer[string, string]
	afters atomic.Int32
}

func (c *countingRevisioned) AfterRevision(rev informer.Revision, f func()) func() bool {
	c.afters.Add(1)
	return c.Informer.AfterRevision(rev, f)
}

func rywMetric(t *testing.T, reg registry, name string) float64 {
	t.Helper()
	return reg.value(t, name, map[string]string{"controller": "parents"})
}

// The harness releases the parents' changes before the children's (the
// order the informers were made), so the second write to a parent reaches
// the controller while the child its first reconcile created is still held
// back from the child informer.
func TestAKeyWhoseChildInformerLagsItsWriteIsParkedUntilTheInformerHasItThenReconciled(t *testing.T) {
	h := reconciletest.New(t)
	parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, string]())
	parentInf := reconciletest.Informer(h, "parents", parents)
	childInf := reconciletest.Informer(h, "children", children)
	rec := newCreator(children, childInf)
	counting := &countingRevisioned{Informer: childInf}
	rec.revs = counting
	reg := newRegistry()
	c := reconciletest.Controller(h, "parents", rec, reconcile.For(parentInf), reconcile.WithMetrics(reg))

	parents.Put("a", 1)
	parents.Put("a", 2)
	parents.Put("a", 3) // a second event for the parked key: one registration still
	h.Settle()

	assert.Equal(t, []bool{false, true}, rec.seen("a"), "parked twice, then reconciled once the child informer had the create")
	creates, dups := rec.counts()
	assert.Equal(t, 1, creates)
	assert.Zero(t, dups)
	assert.Equal(t, int32(1), counting.afters.Load(), "one AfterRevision per waiting entry")
	assert.Equal(t, 2.0, rywMetric(t, reg, "converge_read_your_writes_skips_total"))
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_timeouts_total"))
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_waiting"))
	// A skip is not a reconcile, and no failure.
	assert.Equal(t, 2.0, reg.value(t, "controller_runtime_reconcile_total", map[string]string{"controller": "parents", "result": "success"}))
	assert.Zero(t, reg.value(t, "controller_runtime_reconcile_errors_total", nil))
	_, failing := c.Status("a")
	assert.False(t, failing)
	assert.True(t, c.Idle())
}

// stuckSource lists its store once and then never delivers a change: an
// informer that has lost its store for good.
type stuckSource struct {
	store *memstore.Store[string, string]
}

func (s stuckSource) List(ctx context.Context) ([]informer.Entry[string, string], informer.Revision, error) {
	return s.store.List(ctx)
}

func (stuckSource) Watch(ctx context.Context, _ informer.Revision, _ func(informer.Event[string, string]) error) error {
	<-ctx.Done()
	return ctx.Err()
}

func runInformer[K comparable, V any](t *testing.T, inf *informer.Informer[K, V]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = inf.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.NoError(t, inf.WaitForSync(ctx))
}

func TestAKeyWhoseInformerNeverCatchesUpIsReconciledOnceAtTheTimeoutWithAWarning(t *testing.T) {
	h := reconciletest.New(t)
	parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, string]())
	parentInf := reconciletest.Informer(h, "parents", parents)
	childInf := must.Do(informer.New("children", informer.Source[string, string](stuckSource{children}), informer.WithLogger(h.Logger())))
	runInformer(t, childInf)
	rec := newCreator(children, childInf)
	reg := newRegistry()
	var logs syncBuffer
	c := reconciletest.Controller(h, "parents", rec, reconcile.For(parentInf), reconcile.WithMetrics(reg),
		reconcile.WithReadYourWritesTimeout(time.Minute), reconcile.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	parents.Put("a", 1)
	parents.Put("a", 2)
	h.Settle()
	assert.Equal(t, []bool{false}, rec.seen("a"))
	assert.True(t, c.Idle(), "a parked key is waiting, not busy")
	assert.Equal(t, 1.0, rywMetric(t, reg, "converge_read_your_writes_waiting"))

	h.Step(time.Minute - time.Second)
	assert.Equal(t, []bool{false}, rec.seen("a"), "still parked before the timeout")
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_timeouts_total"))

	h.Step(time.Second)
	assert.Equal(t, []bool{false, false}, rec.seen("a"), "reconciled at the timeout, on the stale view")
	assert.Equal(t, 1.0, rywMetric(t, reg, "converge_read_your_writes_timeouts_total"))
	assert.Equal(t, 1.0, rywMetric(t, reg, "converge_read_your_writes_skips_total"))
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_waiting"))
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "read-your-writes")
	_, dups := rec.counts()
	assert.Equal(t, 1, dups, "the stale view made the duplicate the gate exists to prevent; the store's CAS caught it")

	// The entry is gone: the next change reconciles at once.
	parents.Put("a", 3)
	h.Settle()
	assert.Len(t, rec.seen("a"), 3)
	assert.Equal(t, 1.0, rywMetric(t, reg, "converge_read_your_writes_timeouts_total"))
}

func TestWroteDoesNothingOutsideAReconcileForRevisionZeroOrARevisionTheInformerHas(t *testing.T) {
	h := reconciletest.New(t)
	parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, string]())
	parentInf := reconciletest.Informer(h, "parents", parents)
	seenRev := children.Put("seen", "x")
	childInf := reconciletest.Informer(h, "children", children) // lists "seen"
	require.NoError(t, childInf.WaitForRevision(h.Context(), seenRev))
	lagging := children.Put("lagging", "y") // held: the informer does not have it

	reconcile.Wrote(context.Background(), childInf, lagging) // not a reconcile's context
	var calls atomic.Int32
	rec := reconcile.Func(func(ctx context.Context, _ string) (reconcile.Result, error) {
		calls.Add(1)
		reconcile.Wrote(ctx, childInf, 0)
		reconcile.Wrote(ctx, childInf, seenRev)
		reconcile.Wrote(ctx, nil, lagging)
		return reconcile.Result{}, nil
	})
	reg := newRegistry()
	reconciletest.Controller(h, "parents", rec, reconcile.For(parentInf), reconcile.WithMetrics(reg))
	parents.Put("a", 1)
	parents.Put("a", 2)
	h.Settle()
	assert.Equal(t, int32(2), calls.Load())
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_skips_total"))
}

func TestNewRejectsANonPositiveReadYourWritesTimeout(t *testing.T) {
	inf := must.Do(informer.New("ints", must.Do(memstore.New[string, int]())))
	ok := reconcile.Func(func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := reconcile.New("c", ok, reconcile.For(inf), reconcile.WithReadYourWritesTimeout(d))
		require.ErrorContains(t, err, "WithReadYourWritesTimeout")
		assert.ErrorContains(t, err, "positive")
	}
}

// A controller stopped while a key is parked stops its callback; the next
// Run reconciles every key anyway and parks this one again until the
// informer has the write.
func TestAParkedKeyOutlivesARestartAndIsParkedAgainByTheNextRun(t *testing.T) {
	h := reconciletest.New(t)
	parents, children := must.Do(memstore.New[string, int]()), must.Do(memstore.New[string, string]())
	parentInf := reconciletest.Informer(h, "parents", parents)
	childInf := reconciletest.Informer(h, "children", children)
	rec := newCreator(children, childInf)
	reg := newRegistry()
	c, err := reconcile.New("parents", rec, append(h.Options(), reconcile.For(parentInf), reconcile.WithMetrics(reg))...)
	require.NoError(t, err)

	parents.Put("a", 1)
	parents.Put("a", 2)
	ctx, cancel := context.WithCancel(h.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// Release by hand: Settle would also release the child.
	require.Eventually(t, func() bool { return rywMetric(t, reg, "converge_read_your_writes_skips_total") == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Zero(t, rywMetric(t, reg, "converge_read_your_writes_waiting"), "a stopped Run parks nothing")

	h.Add(c)
	h.Settle()
	assert.Equal(t, []bool{false, true}, rec.seen("a"))
	assert.Equal(t, 2.0, rywMetric(t, reg, "converge_read_your_writes_skips_total"), "parked again by the new Run, until the child was released")
	creates, dups := rec.counts()
	assert.Equal(t, 1, creates)
	assert.Zero(t, dups)
}

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
