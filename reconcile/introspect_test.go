package reconcile_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

func TestWithEventRecorderShouldNeedARecorderWithASinkThatListsEvents(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	h := reconciletest.New(t)
	inf := reconciletest.Informer(h, "ints", store)
	_, err := reconcile.New("c", reconcile.Func(noop), reconcile.For(inf), reconcile.WithEventRecorder(nil))
	assert.ErrorContains(t, err, "WithEventRecorder(nil)")
	_, err = reconcile.New("c", reconcile.Func(noop), reconcile.For(inf),
		reconcile.WithEventRecorder(must.Do(events.NewRecorder("src"))))
	assert.ErrorContains(t, err, `WithEventRecorder("src"): the recorder has no sink that lists events`)
	_, err = reconcile.New("c", reconcile.Func(noop), reconcile.For(inf),
		reconcile.WithEventRecorder(must.Do(events.NewRecorder("src", events.WithSink(must.Do(events.NewMemorySink(0)))))))
	assert.NoError(t, err)
}

func TestWithDebugValueShouldRejectAnotherKeyTypeAndReplaceTheInformersValue(t *testing.T) {
	store := must.Do(memstore.New[string, int]())
	store.Put("a", 1)
	h := reconciletest.New(t)
	inf := reconciletest.Informer(h, "ints", store)
	_, err := reconcile.New("bad", reconcile.Func(noop), reconcile.For(inf),
		reconcile.WithDebugValue(func(int) (any, bool) { return nil, false }))
	assert.ErrorContains(t, err, "WithDebugValue: func(int) (interface {}, bool) does not take keys of type string")

	c := reconciletest.Controller(h, "c", reconcile.Func(noop), reconcile.For(inf), quiet,
		reconcile.WithDebugValue(func(k string) (any, bool) { return "redacted " + k, true }))
	h.Settle()
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Logger: quietLogger,
		Debug: reconcile.DebugOptions{Enabled: true, ShowValues: true}})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	info, ok := reconcile.InspectKey(c, "a")
	require.True(t, ok)
	assert.Equal(t, "redacted a", info.Value)
}
