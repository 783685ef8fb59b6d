package informer_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestRemoveShouldWaitForTheCallInProgressAfterWhichNoCallFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScript()
		inf := must.Do(informer.New[string, int]("t", src, quiet))
		entered, release := make(chan struct{}), make(chan struct{})
		var calls []string
		reg, err := inf.AddHandler(informer.HandlerFuncs[string, int]{
			AddFunc: func(k string, _ int, _ bool) {
				calls = append(calls, k) // only the dispatcher writes; read after Remove
				if k == "a" {
					close(entered)
					<-release
				}
			},
		})
		require.NoError(t, err)
		src.list(1, map[string]int{"a": 1})
		start(t, inf)
		w := src.nextWatch(t)
		<-entered

		removed := make(chan struct{})
		go func() {
			reg.Remove()
			close(removed)
		}()
		synctest.Wait()
		select {
		case <-removed:
			require.FailNow(t, "Remove returned while a call was in progress")
		default:
		}
		w.put(t, "b", 2, 2) // pushed while Remove waits: never delivered
		close(release)
		<-removed
		assert.Equal(t, []string{"a"}, calls)
		w.put(t, "c", 3, 3)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, calls)
		assert.True(t, reg.Idle())
	})
}

func TestRemovedHandlerGetsNothingMore(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h, other := newRecorder(), newRecorder()
	reg, err := inf.AddHandler(h)
	require.NoError(t, err)
	_, err = inf.AddHandler(other)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	w := src.nextWatch(t)
	h.waitCalls(t, 1)
	reg.Remove()
	reg.Remove()
	w.put(t, "b", 2, 2)
	other.waitCalls(t, 2)
	assert.Len(t, h.Calls(), 1)
	assert.True(t, reg.HasSynced())
}

func TestARegistrationIsIdleOnceItsHandlerReturnedForEveryChange(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet))
	gate := make(chan struct{})
	reg, err := inf.AddHandler(informer.HandlerFuncs[string, int]{
		UpdateFunc: func(string, int, int, bool) { <-gate },
	})
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	w := src.nextWatch(t)
	require.Eventually(t, reg.Idle, 5*time.Second, time.Millisecond, "the initial add was delivered")

	w.put(t, "a", 2, 2)
	require.Equal(t, informer.Revision(2), inf.LastRevision())
	assert.False(t, reg.Idle(), "the update is applied, and its delivery blocks")
	close(gate)
	require.Eventually(t, reg.Idle, 5*time.Second, time.Millisecond)
	reg.Remove()
	assert.True(t, reg.Idle())
}

func TestHandlersRemovedWhileRunReturnsAreAllHalted(t *testing.T) {
	for range 20 {
		src := newScript()
		inf := must.Do(informer.New("t", src, quiet))
		var regs []*informer.Registration[string, int]
		for range 8 {
			reg, err := inf.AddHandler(informer.HandlerFuncs[string, int]{})
			require.NoError(t, err)
			regs = append(regs, reg)
		}
		src.list(1, map[string]int{"a": 1})
		stop := start(t, inf)
		src.nextWatch(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, reg := range regs {
				reg.Remove()
			}
		}()
		stop()
		<-done
		for _, reg := range regs {
			assert.True(t, reg.Idle())
		}
	}
}
