package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// whyLog records the triggers of every reconcile, per key.
type whyLog struct {
	mu      sync.Mutex
	runs    map[string][][]reconcile.Trigger
	outcome func(key string, n int) (reconcile.Result, error)
}

func (w *whyLog) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	w.mu.Lock()
	if w.runs == nil {
		w.runs = map[string][][]reconcile.Trigger{}
	}
	w.runs[key] = append(w.runs[key], reconcile.TriggersFrom(ctx))
	n, out := len(w.runs[key]), w.outcome
	w.mu.Unlock()
	if out != nil {
		return out(key, n)
	}
	return reconcile.Result{}, nil
}

func (w *whyLog) of(key string) [][]reconcile.Trigger {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[key]
}

// on turns trigger reasons on, as a Manager with debug pages does.
var on = reconcile.WithTriggerReasons()

// kinds renders triggers without their times, for comparing.
func kinds[T fmt.Stringer](ts []T) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return out
}

func TestTriggersShouldSayAKeyRanForTheInitialListThenForAnUpdateWithItsRevision(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	inf := reconciletest.Informer(h, "ints", store)
	w := &whyLog{}
	reconciletest.Controller(h, "ints", w, reconcile.For(inf), on, quiet)
	h.Settle()
	rev := store.Put("a", 2)
	h.Settle()

	runs := w.of("a")
	require.Len(t, runs, 2)
	require.Len(t, runs[0], 1)
	assert.Equal(t, reconcile.TriggerInitialList, runs[0][0].Kind)
	assert.Equal(t, `informer "ints" added (initial list)`, runs[0][0].String())
	require.Len(t, runs[1], 1)
	u := runs[1][0]
	assert.Equal(t, reconcile.TriggerChange, u.Kind)
	assert.Equal(t, reconcile.Updated, u.Change)
	assert.Equal(t, `informer "ints"`, u.Watch)
	assert.GreaterOrEqual(t, u.Rev, rev, "the informer had the write when it delivered it")
	assert.Equal(t, 1, u.Count)
}

func TestTriggersShouldMergeChangesThatCoalesceWhileTheKeyRunsIntoItsNextRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := reconciletest.New(t)
		store := must.Do(memstore.New[string, int]())
		store.Put("a", 1)
		started, release := make(chan struct{}), make(chan struct{})
		w := &whyLog{outcome: func(_ string, n int) (reconcile.Result, error) {
			if n == 1 {
				close(started)
				<-release
			}
			return reconcile.Result{}, nil
		}}
		inf := must.Do(informer.New("ints", informer.Source[string, int](store), quietInformer)) // not held by the harness
		h.Go("informer", inf.Run)
		c, err := reconcile.New("ints", w, reconcile.For(inf), reconcile.WithClock(h.Clock), on, quiet)
		require.NoError(t, err)
		h.Go("controller", c.Run)
		<-started
		defer func() {
			select {
			case <-release:
			default:
				close(release) // a failed assertion must not leave the reconcile blocked
			}
		}()
		store.Put("a", 2)
		synctest.Wait() // delivered before the next write, so the informer does not coalesce them
		rev := store.Put("a", 3)
		synctest.Wait()

		info, _ := reconcile.InspectKey(c, "a")
		assert.Equal(t, "dirty", info.Phase)
		require.Len(t, info.Triggers, 1, "both updates merged into one reason, queued behind the run in progress")
		assert.Equal(t, reconcile.TriggerChange.String(), info.Triggers[0].Kind)
		assert.Equal(t, 2, info.Triggers[0].Count)
		assert.Equal(t, rev, info.Triggers[0].Rev, "the highest revision")
		require.Len(t, info.InFlightTriggers, 1)
		assert.Equal(t, reconcile.TriggerInitialList.String(), info.InFlightTriggers[0].Kind)
		close(release)
		synctest.Wait()

		runs := w.of("a")
		require.Len(t, runs, 2)
		assert.Equal(t, []string{`informer "ints" updated rev 3 ×2`}, kinds(runs[1]))
	})
}

func TestTriggersShouldSayBackoffAfterAFailureAndRequeueAfterAfterARequestedRequeue(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("fails", 1)
	store.Put("polls", 1)
	w := &whyLog{outcome: func(key string, n int) (reconcile.Result, error) {
		switch {
		case key == "fails" && n == 1:
			return reconcile.Result{}, errors.New("once")
		case key == "polls" && n == 1:
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, nil
	}}
	limiter := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Second})
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", w, reconcile.For(inf), reconcile.WithRateLimiter(limiter), on, quiet)
	h.Settle()
	h.Step(time.Second)

	require.Len(t, w.of("fails"), 2)
	assert.Equal(t, []string{"backoff"}, kinds(w.of("fails")[1]))
	require.Len(t, w.of("polls"), 2)
	assert.Equal(t, []string{"requeue after"}, kinds(w.of("polls")[1]))
}

func TestTriggersShouldNameTheWatchAndSourceThatQueuedTheKey(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	children := must.Do(memstore.New[string, string]())
	inf := reconciletest.Informer(h, "parents", store)
	childInf := reconciletest.Informer(h, "children", children)
	ch := make(chan string, 1)
	w := &whyLog{}
	reconciletest.Controller(h, "parents", w, reconcile.For(inf),
		reconcile.Watch(childInf, func(_ string, parent string) []string { return []string{parent} }),
		reconcile.FromChannel("pokes", ch), on, quiet)
	h.Settle()
	children.Put("c1", "p")
	h.Settle()
	ch <- "q"
	require.Eventually(t, func() bool { return len(w.of("q")) == 1 }, 10*time.Second, time.Millisecond)

	require.Len(t, w.of("p"), 1)
	assert.Equal(t, []string{`informer "children" added rev 1`}, kinds(w.of("p")[0]))
	assert.Equal(t, []string{`source "pokes"`}, kinds(w.of("q")[0]))
}

func TestTheControllersLogLinesAboutAReconcileShouldCarryItsTriggers(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	w := &whyLog{outcome: func(string, int) (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.Terminal(errors.New("boom"))
	}}
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", w, reconcile.For(inf), on, reconcile.WithLogger(logger))
	h.Settle()

	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `trigger="informer \"ints\" added (initial list)"`)
	assert.Contains(t, buf.String(), `boom`)
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestAReconcilesSpanShouldCarryItsTriggers(t *testing.T) {
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	tp := &spans{}
	inf := reconciletest.Informer(h, "ints", store)
	reconciletest.Controller(h, "ints", &whyLog{}, reconcile.For(inf), reconcile.WithTracerProvider(tp), on, quiet)
	h.Settle()

	tp.mu.Lock()
	defer tp.mu.Unlock()
	require.Len(t, tp.ended, 1)
	assert.Equal(t, `["informer \"ints\" added (initial list)"]`, tp.ended[0].attrs["converge.triggers"])
}

func TestAControllerShouldKeepNoReasonsByDefaultOrWithoutTriggerReasons(t *testing.T) {
	for _, opts := range [][]reconcile.Option{{quiet}, {reconcile.WithoutTriggerReasons(), quiet}} {
		h := reconciletest.New(t)
		store := must.Do(memstore.New[string, int]())
		store.Put("a", 1)
		inf := reconciletest.Informer(h, "ints", store)
		w := &whyLog{}
		c := reconciletest.Controller(h, "ints", w, append([]reconcile.Option{reconcile.For(inf)}, opts...)...)
		h.Settle()
		require.Len(t, w.of("a"), 1)
		assert.Nil(t, w.of("a")[0])
		info, ok := reconcile.InspectKey(c, "a")
		require.True(t, ok)
		assert.Nil(t, info.Recent[0].Triggers)
	}
}

func TestWithoutTriggerReasonsShouldKeepThemOffUnderTheDebugPages(t *testing.T) {
	for name, opts := range map[string][]reconcile.Option{
		"without":            {reconcile.WithoutTriggerReasons()},
		"with, then without": {reconcile.WithTriggerReasons(), reconcile.WithoutTriggerReasons()},
	} {
		t.Run(name, func(t *testing.T) {
			store := must.Do(memstore.New[string, int]())
			store.Put("a", 1)
			inf := must.Do(informer.New("ints", store, informer.WithLogger(quietLogger)))
			w := &whyLog{}
			c, err := reconcile.New("ints", w, append([]reconcile.Option{reconcile.For(inf), quiet}, opts...)...)
			require.NoError(t, err)
			m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Logger: quietLogger,
				Debug: reconcile.DebugOptions{Enabled: true}})
			require.NoError(t, err)
			require.NoError(t, m.AddController(c))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			require.Eventually(t, func() bool { return len(w.of("a")) == 1 }, 10*time.Second, time.Millisecond)
			assert.Nil(t, w.of("a")[0], "no reasons, though the debug pages would turn them on")
			cancel()
			require.NoError(t, <-done)
		})
	}
}

func TestTriggersFromOutsideAReconcileShouldBeNil(t *testing.T) {
	assert.Nil(t, reconcile.TriggersFrom(context.Background()))
}
