package informer_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// batchSource is a plain Source the test drives: List returns the entries
// it was given, and Watch emits each batch sent on batches back to back,
// as a store emits what one read of it returned, reporting on acks what
// the last emit returned.
type batchSource struct {
	entries []informer.Entry[string, int]
	rev     informer.Revision
	batches chan []informer.Event[string, int]
	acks    chan error
}

func newBatchSource(rev informer.Revision, kv map[string]int) *batchSource {
	s := &batchSource{rev: rev, batches: make(chan []informer.Event[string, int]), acks: make(chan error, 1)}
	for k, v := range kv {
		s.entries = append(s.entries, informer.Entry[string, int]{Key: k, Value: v})
	}
	return s
}

func (s *batchSource) List(context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	return s.entries, s.rev, nil
}

func (s *batchSource) Watch(ctx context.Context, _ informer.Revision, emit func(informer.Event[string, int]) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-s.batches:
			var err error
			for _, ev := range b {
				if err = emit(ev); err != nil {
					break
				}
			}
			s.acks <- err
			if err != nil {
				return err
			}
		}
	}
}

// send hands the informer one batch and returns what emit returned, once
// it has returned.
func (s *batchSource) send(t *testing.T, evs ...informer.Event[string, int]) error {
	t.Helper()
	select {
	case s.batches <- evs:
	case <-time.After(wait):
		require.FailNow(t, "the watch is not receiving")
	}
	return <-s.acks
}

func put(key string, v int, rev informer.Revision) informer.Event[string, int] {
	return informer.Event[string, int]{Type: informer.Put, Key: key, Value: v, Revision: rev}
}

func del(key string, rev informer.Revision) informer.Event[string, int] {
	return informer.Event[string, int]{Type: informer.Delete, Key: key, Revision: rev}
}

func TestABurstShouldBeAppliedInOrderAndEveryHandlerEndWithEachKeysLatestState(t *testing.T) {
	src := newBatchSource(10, map[string]int{"a": 1, "b": 1})
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	fast, slow := newRecorder(), newRecorder()
	slow.slow = time.Millisecond
	for _, h := range []*recorder{fast, slow} {
		_, err := inf.AddHandler(h)
		require.NoError(t, err)
	}
	start(t, inf)
	require.NoError(t, inf.WaitForSync(context.Background()))

	require.NoError(t, src.send(t,
		put("a", 2, 11),
		put("c", 1, 12),
		del("b", 13),
		put("a", 3, 14),
		put("b", 5, 15), // created again
		put("c", 1, 12), // a duplicate
		informer.Event[string, int]{Type: informer.Bookmark, Revision: 16},
	))
	require.NoError(t, inf.WaitForRevision(context.Background(), 16))
	want := map[string]int{"a": 3, "b": 5, "c": 1}
	assert.Equal(t, want, cacheMap(inf))
	assert.Equal(t, informer.Revision(16), inf.LastRevision())
	assert.Equal(t, uint64(5), inf.Stats().Events, "every change but the duplicate and the bookmark")
	for name, h := range map[string]*recorder{"fast": fast, "slow": slow} {
		require.Eventually(t, func() bool { return maps.Equal(want, h.View()) }, wait, time.Millisecond, "%s handler: %v", name, h.View())
		assert.Empty(t, h.Violations(), "%s handler: each call starts from the view the earlier ones built", name)
	}

	// The next batch starts where this one ended, and is checked against
	// the key's revisions as a single event would be.
	require.NoError(t, src.send(t, put("a", 9, 14), put("d", 1, 17)))
	require.NoError(t, inf.WaitForRevision(context.Background(), 17))
	assert.Equal(t, map[string]int{"a": 3, "b": 5, "c": 1, "d": 1}, cacheMap(inf), "a's Put at its cached revision is a duplicate")
}

func TestEveryKeyOfABurstLongerThanOneLockHoldShouldReachTheHandlerInRevisionOrder(t *testing.T) {
	src := newBatchSource(1, nil)
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRecorder()
	reg, err := inf.AddHandler(h)
	require.NoError(t, err)
	start(t, inf)
	require.NoError(t, inf.WaitForSync(context.Background()))

	const n = 1000 // several lock holds
	var evs []informer.Event[string, int]
	var want []call
	for i := range n {
		key := fmt.Sprintf("k%04d", i)
		evs = append(evs, put(key, i, informer.Revision(i+2)))
		want = append(want, call{Op: "add", Key: key, New: i})
	}
	delivered := make(chan struct{})
	reg.AfterRevision(n+1, func() { close(delivered) })
	require.NoError(t, src.send(t, evs...))
	require.NoError(t, inf.WaitForRevision(context.Background(), n+1), "woken by the batch")
	assert.Equal(t, n, inf.Len())
	select {
	case <-delivered:
	case <-time.After(wait):
		require.FailNow(t, "Registration.AfterRevision not called after the batch")
	}
	assert.Equal(t, want, h.Calls(), "the handler had every change when its AfterRevision ran, in revision order")
}

func TestCancellingTheContextInTheMiddleOfABurstShouldStopApplyingItAtTheNextLockHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const cancelAt = 300
	src := newBatchSource(1, nil)
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithTransform(func(v int) int {
		if v == cancelAt {
			cancel() // while the informer applies the batch
		}
		return v
	})))
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	require.NoError(t, inf.WaitForSync(ctx))

	var evs []informer.Event[string, int]
	for i := range 1000 {
		evs = append(evs, put(fmt.Sprintf("k%04d", i), i, informer.Revision(i+2)))
	}
	// Whether emit reports the cancellation depends on how far the
	// source got before it: it may have handed over the whole burst.
	if err := src.send(t, evs...); err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(wait):
		require.FailNow(t, "Run did not return")
	}
	// The lock hold that met the cancellation is applied whole (at most
	// 256 changes, up to the 300th's hold), and nothing after it.
	n := inf.Len()
	assert.Greater(t, n, cancelAt)
	assert.LessOrEqual(t, n, cancelAt+256)
	assert.Equal(t, informer.Revision(n+1), inf.LastRevision())
	for i := range n {
		v, ok := inf.Get(fmt.Sprintf("k%04d", i))
		require.True(t, ok, "k%04d: a prefix of the batch, without gaps", i)
		require.Equal(t, i, v)
	}
}
