package informer_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// gatedHandler records the keys it is given, in order, with the callbacks
// that ran among them, and blocks on hold while hold is set.
type gatedHandler struct {
	mu   sync.Mutex
	log  []string
	hold chan struct{} // nil: do not block
}

func (h *gatedHandler) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, s)
}

func (h *gatedHandler) Log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.log...)
}

func (h *gatedHandler) funcs() informer.HandlerFuncs[string, int] {
	return informer.HandlerFuncs[string, int]{
		AddFunc: func(k string, _ int, _ bool) {
			h.mu.Lock()
			hold := h.hold
			h.mu.Unlock()
			if hold != nil {
				<-hold
			}
			h.note("add " + k)
		},
	}
}

// holdNext makes the handler block on its next calls until the returned
// channel is closed.
func (h *gatedHandler) holdNext() chan struct{} {
	hold := make(chan struct{})
	h.mu.Lock()
	h.hold = hold
	h.mu.Unlock()
	return hold
}

// registered runs an informer in the bubble with a gatedHandler added
// before it listed "a" at revision 1, and returns the watch it opened.
func registered(t *testing.T) (*gatedHandler, *informer.Registration[string, int], *informer.Informer[string, int], *watchCall) {
	t.Helper()
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := &gatedHandler{}
	reg, err := inf.AddHandler(h.funcs())
	require.NoError(t, err)
	w, stop := running(t, src, inf, 1, map[string]int{"a": 1})
	t.Cleanup(stop)
	synctest.Wait()
	return h, reg, inf, w
}

func TestRegistrationAfterRevisionShouldRunOnlyOnceTheHandlerHasBeenGivenTheChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, reg, inf, w := registered(t)
		hold := h.holdNext()
		var cacheFired atomic.Bool
		inf.AfterRevision(2, func() { cacheFired.Store(true) })
		reg.AfterRevision(2, func() { h.note("callback") })
		w.put(t, "b", 2, 2)
		synctest.Wait()
		require.Equal(t, informer.Revision(2), inf.LastRevision())
		assert.True(t, cacheFired.Load(), "Informer.AfterRevision fires on the cache")
		assert.Equal(t, []string{"add a"}, h.Log(), "the callback ran before the handler was given b")

		close(hold)
		synctest.Wait()
		assert.Equal(t, []string{"add a", "add b", "callback"}, h.Log())
	})
}

func TestRegistrationAfterRevisionShouldRunAtOnceWhenTheHandlerHasEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		h := &gatedHandler{}
		reg, err := inf.AddHandler(h.funcs())
		require.NoError(t, err)
		_, stop := running(t, src, inf, 3, map[string]int{"a": 1})
		defer stop()
		synctest.Wait()
		var n atomic.Int32
		reg.AfterRevision(2, func() { n.Add(1) })
		synctest.Wait()
		assert.EqualValues(t, 1, n.Load())
	})
}

func TestRegistrationAfterRevisionShouldWaitForAReplayToALateHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		w, stop := running(t, src, inf, 1, map[string]int{"a": 1, "b": 1, "c": 1})
		defer stop()
		synctest.Wait()

		hold := make(chan struct{})
		h := &gatedHandler{hold: hold}
		reg, err := inf.AddHandler(h.funcs()) // replays a, b and c, blocked on the first
		require.NoError(t, err)
		reg.AfterRevision(2, func() { h.note("callback") })
		w.put(t, "d", 1, 2)
		synctest.Wait()
		assert.Empty(t, h.Log())

		close(hold)
		synctest.Wait()
		log := h.Log()
		require.Len(t, log, 5)
		assert.Equal(t, "add d", log[3], "the replay, then the change")
		assert.Equal(t, "callback", log[4])
	})
}

func TestRegistrationAfterRevisionStopShouldPreventACallNotYetMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, reg, _, w := registered(t)
		var called atomic.Int32

		// Stopped before the informer reaches the revision.
		s1 := reg.AfterRevision(2, func() { called.Add(1) })
		assert.True(t, s1())
		assert.False(t, s1(), "a second stop")

		// Stopped while waiting for the handler.
		hold := h.holdNext()
		s2 := reg.AfterRevision(2, func() { called.Add(1) })
		w.put(t, "b", 2, 2)
		synctest.Wait()
		assert.True(t, s2())
		close(hold)
		synctest.Wait()
		assert.Zero(t, called.Load())

		// Stopped after it ran.
		s3 := reg.AfterRevision(2, func() { called.Add(1) })
		synctest.Wait()
		assert.EqualValues(t, 1, called.Load())
		assert.False(t, s3())
	})
}

func TestRegistrationAfterRevisionShouldNeverCallAfterTheHandlerIsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, reg, _, w := registered(t)
		hold := h.holdNext()
		var called atomic.Bool
		s := reg.AfterRevision(2, func() { called.Store(true) })
		w.put(t, "b", 2, 2)
		synctest.Wait()
		go reg.Remove() // waits for the blocked call
		synctest.Wait()
		close(hold)
		synctest.Wait()
		assert.False(t, called.Load())
		assert.True(t, s(), "dropped, never called")
	})
}
