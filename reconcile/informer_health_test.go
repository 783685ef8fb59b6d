package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// heldWatch is a memstore whose watches deliver nothing until open is
// closed: a dead watch, as the informer sees one, that can be revived.
type heldWatch struct {
	*memstore.Store[string, int]
	open chan struct{}
}

func (h heldWatch) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	select {
	case <-h.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Store.Watch(ctx, after, emit)
}

// stuckFixture runs a Manager with StuckAfter a minute, on a fake clock,
// over an informer "held" whose watch delivers nothing until the returned
// channel is closed.
func stuckFixture(t *testing.T) (m *reconcile.Manager, inf *informer.Informer[string, int], src heldWatch, clk *clocktesting.FakeClock, reg registry) {
	return stuckFixtureAfter(t, time.Minute)
}

// stuckFixtureAfter is stuckFixture with StuckAfter set to after.
func stuckFixtureAfter(t *testing.T, after time.Duration) (m *reconcile.Manager, inf *informer.Informer[string, int], src heldWatch, clk *clocktesting.FakeClock, reg registry) {
	t.Helper()
	src = heldWatch{must.Do(memstore.New[string, int]()), make(chan struct{})}
	src.Put("a", 1)
	clk = clocktesting.NewFakeClock(time.Now())
	inf = must.Do(informer.New("held", src, informer.WithLogger(quietLogger)))
	reg = newRegistry()
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Gatherer: reg, Logger: quietLogger,
		StuckAfter: after, Clock: clk})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	ctx := runManager(t, m)
	require.NoError(t, inf.WaitForSync(ctx))
	return m, inf, src, clk, reg
}

// runManager runs m until the test ends, when Run must return nil, and
// returns once its server listens; the context is Run's.
func runManager(t *testing.T, m *reconcile.Manager) context.Context {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return m.Addr() != "" }, 10*time.Second, time.Millisecond)
	return ctx
}

func TestReadyzShouldFailWhileAnInformerStandsStillBehindTheStoreForStuckAfter(t *testing.T) {
	m, inf, src, clk, reg := stuckFixture(t)
	base := "http://" + m.Addr()
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)

	src.Put("b", 2) // the store moves on; the informer's watch does not
	clk.Step(2 * time.Second)
	code, body = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code, "behind for a moment is not stuck: %s", body)
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_lag_revisions", map[string]string{"informer": "held"}))
	assert.Equal(t, 0.0, reg.value(t, "converge_informer_stuck", map[string]string{"informer": "held"}))

	clk.Step(time.Minute)
	code, body = get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `informer "held": stuck: its revision 1 has stood still for 1m0s behind the store's head 2`)
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_stuck", map[string]string{"informer": "held"}))
	assert.Equal(t, 60.0, reg.value(t, "converge_informer_stalled_seconds", map[string]string{"informer": "held"}))

	close(src.open) // the watch comes back and catches up
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, inf.WaitForRevision(ctx, 2))
	clk.Step(2 * time.Second)
	code, body = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 0.0, reg.value(t, "converge_informer_stuck", map[string]string{"informer": "held"}))
}

func TestANegativeStuckAfterShouldNeverCallAnInformerStuck(t *testing.T) {
	m, _, src, clk, _ := stuckFixtureAfter(t, -1)
	src.Put("b", 2)
	clk.Step(2 * time.Second)
	_, _ = get(t, "http://"+m.Addr()+"/readyz")
	clk.Step(24 * time.Hour)
	code, body := get(t, "http://"+m.Addr()+"/readyz")
	assert.Equal(t, http.StatusOK, code, body)
}

func TestAnInformerThatMovesShouldNotBeStuckHoweverLongItLags(t *testing.T) {
	m, inf, src, clk, _ := stuckFixture(t)
	close(src.open)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		rev := src.Put("b", i)
		require.NoError(t, inf.WaitForRevision(ctx, rev))
		src.Put("c", i) // always one behind when looked at
		clk.Step(30 * time.Second)
		code, body := get(t, "http://"+m.Addr()+"/readyz")
		require.Equal(t, http.StatusOK, code, "look %d: %s", i, body)
	}
}

func TestInformerMetricsShouldCountListsAndShowTheCacheOnTheGivenRegistry(t *testing.T) {
	m, _, _, _, reg := stuckFixture(t)
	held := map[string]string{"informer": "held"}
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_synced", held))
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_cache_size", held))
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_lists_total", held))
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_last_revision", held))
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_head_revision", held))
	for _, name := range []string{"converge_informer_relists_total", "converge_informer_list_errors_total",
		"converge_informer_watch_errors_total", "converge_informer_decode_errors_total", "converge_informer_bad_keys"} {
		assert.NotNil(t, reg.metric(t, name, held), "%s is served", name)
	}
	_, body := get(t, "http://"+m.Addr()+"/metrics")
	assert.Contains(t, body, `converge_informer_synced{informer="held"} 1`)
}

func TestManagersShouldShareARegistryUnlessTheirInformersShareAName(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := reconcile.NewManager(reconcile.ManagerOptions{Registerer: reg})
	require.NoError(t, err)
	m2, err := reconcile.NewManager(reconcile.ManagerOptions{Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, m1.AddInformer(must.Do(informer.New("a", must.Do(memstore.New[string, int]())))))
	require.NoError(t, m2.AddInformer(must.Do(informer.New("b", must.Do(memstore.New[string, int]())))))
	err = m2.AddInformer(must.Do(informer.New("a", must.Do(memstore.New[string, int]()))))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `informer "a": the Registerer has metrics for an informer of this name already`)
	assert.NoError(t, m2.AddInformer(must.Do(informer.New("c", must.Do(memstore.New[string, int]())))), "the failed add claimed nothing")
}

// slowHead is a memstore whose head takes until the asker gives up,
// counting the asks in progress.
type slowHead struct {
	*memstore.Store[string, int]
	asking, most *atomic.Int32
}

func (s slowHead) Revision(ctx context.Context) (informer.Revision, error) {
	n := s.asking.Add(1)
	defer s.asking.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestTheOverviewShouldAskEveryStoreForItsHeadAtOnce(t *testing.T) {
	var asking, most atomic.Int32
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true}, Logger: quietLogger})
	require.NoError(t, err)
	for _, name := range []string{"a", "b", "c", "d"} {
		require.NoError(t, m.AddInformer(must.Do(informer.New(name, slowHead{must.Do(memstore.New[string, int]()), &asking, &most}))))
	}
	code, body := getPage(t, m.DebugHandler(), "/debug/converge/?format=json", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, int32(4), most.Load(), "the four stores were asked together, not one after another")
	var o debugpage.Overview
	require.NoError(t, json.Unmarshal([]byte(body), &o))
	require.Len(t, o.Informers, 4)
	for _, inf := range o.Informers {
		assert.False(t, inf.HeadKnown, inf.Name)
		assert.NotEmpty(t, inf.HeadError, "a store that did not answer in time says so: %s", inf.Name)
	}
}

// countedHead is a memstore that counts the asks for its head.
type countedHead struct {
	*memstore.Store[string, int]
	asks *atomic.Int32
}

func (c countedHead) Revision(context.Context) (informer.Revision, error) {
	c.asks.Add(1)
	return c.Store.Revision(), nil
}

func TestScrapesAndProbesShouldAskTheStoreForItsHeadAtMostOnceASecond(t *testing.T) {
	var asks atomic.Int32
	clk := clocktesting.NewFakeClock(time.Now())
	reg := newRegistry()
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Registerer: reg, Clock: clk,
		Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true}, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(must.Do(informer.New("counted", countedHead{must.Do(memstore.New[string, int]()), &asks}))))
	for range 10 {
		_, err := reg.Gather()
		require.NoError(t, err)
		getPage(t, m.DebugHandler(), "/debug/converge/?format=json", "")
	}
	assert.Equal(t, int32(1), asks.Load(), "ten scrapes and ten page loads within a second")
	clk.Step(time.Second)
	_, err = reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, int32(2), asks.Load(), "a second later, asked again")
}
