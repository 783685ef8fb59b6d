package reconcile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
)

// seenKeys records the keys a reconciler was called for.
type seenKeys struct {
	mu   sync.Mutex
	keys map[string]int
}

func (s *seenKeys) reconcile(_ context.Context, key string) (reconcile.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]int{}
	}
	s.keys[key]++
	return reconcile.Result{}, nil
}

func (s *seenKeys) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key] > 0
}

func TestAddControllerShouldRunTheInformersItsControllerWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parents := must.Do(memstore.New[string, int]())
		children := must.Do(memstore.New[string, string]()) // child -> owner
		refs := must.Do(memstore.New[string, string]())     // ref -> the parent it names
		parents.Put("p1", 1)
		children.Put("c1", "p2")
		refs.Put("r1", "p3")
		parentInf := must.Do(informer.New("parents", parents))
		childInf := must.Do(informer.New("children", children))
		refInf := must.Do(informer.New("refs", refs))
		var seen seenKeys
		c, err := reconcile.New("parents", reconcile.Func(seen.reconcile), reconcile.For(parentInf),
			reconcile.Owns(childInf, func(_ string, owner string) (string, bool) { return owner, true }),
			reconcile.Watch(refInf, func(_ string, parent string) []string { return []string{parent} }),
			reconcile.WithLogger(quietLogger))
		require.NoError(t, err)

		m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: quietLogger})
		require.NoError(t, err)
		require.NoError(t, m.AddController(c), "no AddInformer: the Manager adds the controller's informers")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()

		for _, inf := range []interface{ HasSynced() bool }{parentInf, childInf, refInf} {
			assert.True(t, inf.HasSynced(), "every watched informer runs and syncs")
		}
		for _, key := range []string{"p1", "p2", "p3"} {
			assert.True(t, seen.has(key), "%s is reconciled, through For, Owns and Watch", key)
		}
		children.Put("c2", "p4")
		synctest.Wait()
		assert.True(t, seen.has("p4"), "a change after the start is reconciled")
		cancel()
		require.NoError(t, <-done)
	})
}

func TestTwoControllersWatchingOneInformerShouldBothBeAdded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := must.Do(memstore.New[string, int]())
		store.Put("k", 1)
		inf := must.Do(informer.New("ints", store))
		var a, b seenKeys
		ca, err := reconcile.New("a", reconcile.Func(a.reconcile), reconcile.For(inf), reconcile.WithLogger(quietLogger))
		require.NoError(t, err)
		cb, err := reconcile.New("b", reconcile.Func(b.reconcile), reconcile.For(inf), reconcile.WithLogger(quietLogger))
		require.NoError(t, err)

		m, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: quietLogger})
		require.NoError(t, err)
		require.NoError(t, m.AddController(ca))
		require.NoError(t, m.AddController(cb), "the informer a added is shared, not added twice")
		require.NoError(t, m.AddInformer(inf), "adding an informer the Manager runs already is no error")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		assert.True(t, a.has("k"))
		assert.True(t, b.has("k"))
		cancel()
		require.NoError(t, <-done, "one informer run once: two runs of it would fail")
	})
}

func TestAddControllerShouldAddNothingWhenItFails(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	inf := must.Do(informer.New("ints", store))
	other := must.Do(informer.New("ints", store)) // another informer of the same name
	c, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(inf))
	require.NoError(t, err)
	d, err := reconcile.New("d", reconcile.Func(noop), reconcile.For(other))
	require.NoError(t, err)
	fresh := must.Do(informer.New("fresh", store))
	e, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(fresh))
	require.NoError(t, err)

	m, err := reconcile.NewManager(reconcile.ManagerOptions{})
	require.NoError(t, err)
	require.NoError(t, m.AddController(c))
	assert.ErrorContains(t, m.AddController(d), `controller "d": informer "ints": the name is taken`,
		"two informers of one name cannot both run")
	assert.ErrorContains(t, m.AddController(e), `controller "c": the name is taken`)
	f, err := reconcile.New("f", reconcile.Func(noop), reconcile.For(fresh))
	require.NoError(t, err)
	require.NoError(t, m.AddController(f), `the failed AddController left informer "fresh" unclaimed`)
}

func TestAddLeaderFuncShouldRunOnlyOnTheLeaderAndAddFuncOnEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lock := memlock.NewLock()
		type ran struct{ everywhere, leading atomic.Bool }
		start := func(id string, r *ran) (*reconcile.Manager, func()) {
			m, err := reconcile.NewManager(reconcile.ManagerOptions{Lock: lock, Leader: fastLeader(id), Logger: quietLogger})
			require.NoError(t, err)
			require.NoError(t, m.AddFunc("everywhere", func(ctx context.Context) error {
				r.everywhere.Store(true)
				<-ctx.Done()
				return nil
			}))
			require.NoError(t, m.AddLeaderFunc("leading", func(ctx context.Context) error {
				_, ok := leader.TermFromContext(ctx)
				assert.True(t, ok, "a leader-only function's context carries the term")
				r.leading.Store(true)
				<-ctx.Done()
				return nil
			}))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			return m, func() { cancel(); require.NoError(t, <-done) }
		}
		var a, b ran
		ma, stopA := start("a", &a)
		synctest.Wait()
		require.True(t, ma.IsLeader())
		_, stopB := start("b", &b)
		time.Sleep(time.Second) // b campaigns, and loses, many times
		synctest.Wait()
		assert.True(t, a.everywhere.Load())
		assert.True(t, a.leading.Load())
		assert.True(t, b.everywhere.Load(), "AddFunc runs on a standby too")
		assert.False(t, b.leading.Load(), "AddLeaderFunc waits for leadership")
		stopA() // releases the lease
		time.Sleep(time.Second)
		synctest.Wait()
		assert.True(t, b.leading.Load(), "the new leader runs it")
		stopB()
	})
}

func TestAddControllerWhoseInformersMetricsClashShouldRegisterNoneOfThem(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := reconcile.NewManager(reconcile.ManagerOptions{Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, m1.AddInformer(must.Do(informer.New("b", must.Do(memstore.New[string, int]())))))
	m2, err := reconcile.NewManager(reconcile.ManagerOptions{Registerer: reg})
	require.NoError(t, err)
	a := must.Do(informer.New("a", must.Do(memstore.New[string, int]())))
	b := must.Do(informer.New("b", must.Do(memstore.New[string, int]())))
	c, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(a),
		reconcile.Watch(b, func(k string, _ int) []string { return []string{k} }))
	require.NoError(t, err)
	assert.ErrorContains(t, m2.AddController(c), `informer "b": the Registerer has metrics for an informer of this name already`)
	assert.NoError(t, m2.AddInformer(a), `the failed AddController took "a"'s metrics back`)
}
