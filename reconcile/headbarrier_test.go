package reconcile_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
)

// heldSource is a memory store whose watch can be held: the changes made
// while it is held reach the store, and its head, but not the informer,
// like the last writes of a leader that a new leader's watch has not
// delivered yet.
type heldSource struct {
	*memstore.Store[string, int]
	mu      sync.Mutex
	release chan struct{} // nil: not held; closed: released
}

func (s *heldSource) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release = make(chan struct{})
}

func (s *heldSource) unhold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = nil
}

func (s *heldSource) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	return s.Store.Watch(ctx, after, func(ev informer.Event[string, int]) error {
		s.mu.Lock()
		held := s.release
		s.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return emit(ev)
	})
}

// headless hides the store's head: a Source that cannot tell it.
type headless struct{ src *heldSource }

func (h headless) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	return h.src.List(ctx)
}

func (h headless) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	return h.src.Watch(ctx, after, emit)
}

// staleStart runs an informer over src, lets it sync, holds its watch and
// writes k=2 (the old leader's write), then starts a controller whose
// reconciler notes the value of k it reads. It returns the values seen so
// far and a func that stops everything.
func staleStart(t *testing.T, src informer.Source[string, int], held *heldSource, opts ...reconcile.Option) (seen func() []int, stop func()) {
	t.Helper()
	held.Put("k", 1)
	inf := must.Do(informer.New[string, int]("things", src, informer.WithLogger(quietLogger)))
	var mu sync.Mutex
	var values []int
	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		v, _ := inf.Get(key)
		mu.Lock()
		values = append(values, v)
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	c, err := reconcile.New("c", rec, append([]reconcile.Option{reconcile.For(inf), reconcile.WithShutdownGrace(0), quiet}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	infDone := make(chan error, 1)
	go func() { infDone <- inf.Run(ctx) }()
	require.NoError(t, inf.WaitForSync(ctx))
	held.hold()
	held.Put("k", 2)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	seen = func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), values...)
	}
	return seen, func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, <-infDone)
	}
}

func TestWorkersWaitUntilTheCacheHoldsTheStoresHeadWhenARunStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &heldSource{Store: must.Do(memstore.New[string, int]())}
		seen, stop := staleStart(t, src, src, reconcile.WithHeadBarrier())
		defer stop()
		synctest.Wait()
		assert.Empty(t, seen(), "no reconcile while the cache lags the store's head")

		src.unhold()
		synctest.Wait()
		require.NotEmpty(t, seen())
		assert.Equal(t, 2, seen()[0], "the first reconcile reads the old leader's last write")
	})
}

func TestWorkersStartAfterTheSyncTimeoutIfTheCacheNeverReachesTheHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		src := &heldSource{Store: must.Do(memstore.New[string, int]())}
		seen, stop := staleStart(t, src, src, reconcile.WithHeadBarrier(), reconcile.WithSyncTimeout(time.Minute),
			reconcile.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		defer func() {
			src.unhold()
			stop()
		}()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		assert.Empty(t, seen(), "held until the sync timeout")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []int{1}, seen(), "started anyway, on the cache it has")
		assert.Contains(t, logs.String(), "did not reach the store's head revision")
		assert.Contains(t, logs.String(), `\"things\" (at 1 of 2)`)
	})
}

func TestWorkersStartAtOnceWhenTheSourceCannotTellItsHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &heldSource{Store: must.Do(memstore.New[string, int]())}
		seen, stop := staleStart(t, headless{src}, src, reconcile.WithHeadBarrier())
		defer func() {
			src.unhold()
			stop()
		}()
		synctest.Wait()
		assert.Equal(t, []int{1}, seen(), "nothing to wait for: the documented gap")
	})
}

func TestWorkersDoNotWaitForTheStoresHeadUnlessTheBarrierIsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &heldSource{Store: must.Do(memstore.New[string, int]())}
		seen, stop := staleStart(t, src, src)
		defer func() {
			src.unhold()
			stop()
		}()
		synctest.Wait()
		assert.Equal(t, []int{1}, seen(), "off by default: the first reconcile reads the lagging cache")
	})
}
