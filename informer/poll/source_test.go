package poll_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/internal/must"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// object is what the fake backend lists.
type object struct {
	Name    string
	Version int
	Labels  []string // makes the default equality walk a slice
}

func name(o object) string { return o.Name }

type event = informer.Event[string, object]

// bookmark is the event that ends a poll that found changes.
func bookmark(rev informer.Revision) event { return event{Type: informer.Bookmark, Revision: rev} }

const interval = 10 * time.Second

// backend is a fake list endpoint: the test sets what it lists, or an error,
// and learns of each call on listed.
type backend struct {
	mu      sync.Mutex
	objects []object
	err     error
	listed  chan struct{}
}

func newBackend(objects ...object) *backend {
	return &backend{objects: objects, listed: make(chan struct{}, 1000)}
}

func (b *backend) set(objects ...object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects = objects
}

func (b *backend) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

func (b *backend) list(context.Context) ([]object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listed <- struct{}{}
	return slices.Clone(b.objects), b.err
}

// awaitList fails the test unless the backend is listed soon.
func (b *backend) awaitList(t *testing.T) {
	t.Helper()
	select {
	case <-b.listed:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the backend was not listed")
	}
}

// newTestSource returns a source over a new backend on a fake clock, without
// jitter unless opts set it.
func newTestSource(t *testing.T, opts ...poll.Option[object]) (*poll.Source[string, object], *backend, *clocktesting.FakeClock) {
	t.Helper()
	b := newBackend()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	base := []poll.Option[object]{poll.WithClock(clk), poll.WithInterval(interval), poll.WithJitter(0)}
	return must.Do(poll.New(b.list, name, append(base, opts...)...)), b, clk
}

// list calls s.List and drains the backend's signal for it.
func list(t *testing.T, s *poll.Source[string, object], b *backend) ([]informer.Entry[string, object], informer.Revision) {
	t.Helper()
	entries, rev, err := s.List(context.Background())
	require.NoError(t, err)
	b.awaitList(t)
	return entries, rev
}

// watcher is a Watch running on its own goroutine.
type watcher struct {
	events chan event
	done   chan error
	cancel context.CancelFunc
}

// watch runs s.Watch after after until the test ends.
func watch(t *testing.T, s *poll.Source[string, object], after informer.Revision) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{events: make(chan event, 100), done: make(chan error, 1), cancel: cancel}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		w.done <- s.Watch(ctx, after, func(e event) error {
			select {
			case w.events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return w
}

// result returns what Watch returned, failing the test if it does not
// return soon.
func (w *watcher) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-w.done:
		return err
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Watch did not return")
		return nil
	}
}

// awaitTimer waits until Watch has started its wait on clk.
func awaitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "Watch never waited on the clock")
}

// pollOnce lets one interval pass, so that Watch lists once, and returns
// the events of that poll: Watch emits them all before it starts its next
// wait, which is how pollOnce knows it has them all.
func pollOnce(t *testing.T, w *watcher, b *backend, clk *clocktesting.FakeClock) []event {
	t.Helper()
	awaitTimer(t, clk)
	clk.Step(interval) // fires the timer, which leaves the clock's waiters
	b.awaitList(t)
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		select {
		case err := <-w.done:
			require.FailNow(t, "Watch returned", "%v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "Watch did not wait again after its poll")
		runtime.Gosched()
	}
	var got []event
	for {
		select {
		case e := <-w.events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func TestListShouldReturnTheValuesKeyedAndCountTheChangesSinceTheLastList(t *testing.T) {
	s, b, _ := newTestSource(t)
	a, c := object{Name: "a", Version: 1}, object{Name: "c", Version: 1}
	b.set(a, c)
	entries, rev := list(t, s, b)
	assert.Equal(t, []informer.Entry[string, object]{{Key: "a", Value: a}, {Key: "c", Value: c}}, entries)
	assert.Equal(t, informer.Revision(2), rev, "two new keys")

	_, rev = list(t, s, b)
	assert.Equal(t, informer.Revision(2), rev, "nothing changed")

	a2 := object{Name: "a", Version: 2}
	b.set(a2)
	entries, rev = list(t, s, b)
	assert.Equal(t, []informer.Entry[string, object]{{Key: "a", Value: a2}}, entries)
	assert.Equal(t, informer.Revision(4), rev, "a changed, c vanished")
}

func TestWatchShouldEmitPutsForNewAndChangedKeysThenDeletesWithTheLastValue(t *testing.T) {
	s, b, clk := newTestSource(t)
	a1, b1, c1 := object{Name: "a", Version: 1}, object{Name: "b", Version: 1}, object{Name: "c", Version: 1}
	b.set(a1, b1, c1)
	_, rev := list(t, s, b)
	require.Equal(t, informer.Revision(3), rev)
	w := watch(t, s, rev)

	b2, d1 := object{Name: "b", Version: 2}, object{Name: "d", Version: 1}
	b.set(b2, d1, a1) // a unchanged, b changed, c vanished, d new
	assert.Equal(t, []event{
		{Type: informer.Put, Key: "b", Value: b2, Revision: 4},
		{Type: informer.Put, Key: "d", Value: d1, Revision: 5},
		{Type: informer.Delete, Key: "c", Value: c1, Revision: 6},
		bookmark(6), // the poll is complete
	}, pollOnce(t, w, b, clk))

	assert.Empty(t, pollOnce(t, w, b, clk), "nothing changed")

	b.set()
	assert.Equal(t, []event{
		{Type: informer.Delete, Key: "b", Value: b2, Revision: 7},
		{Type: informer.Delete, Key: "d", Value: d1, Revision: 8},
		{Type: informer.Delete, Key: "a", Value: a1, Revision: 9},
		bookmark(9),
	}, pollOnce(t, w, b, clk), "deletes in the previous list's order")

	_, rev = list(t, s, b)
	assert.Equal(t, informer.Revision(9), rev, "List agrees with the watch")
}

func TestWatchFromZeroOnANewSourceShouldEmitTheFirstListAsPuts(t *testing.T) {
	s, b, clk := newTestSource(t)
	a := object{Name: "a"}
	b.set(a)
	w := watch(t, s, 0)
	assert.Equal(t, []event{{Type: informer.Put, Key: "a", Value: a, Revision: 1}, bookmark(1)}, pollOnce(t, w, b, clk))
}

func TestDuplicateKeysInOneListShouldKeepTheLastValueAtTheFirstPosition(t *testing.T) {
	s, b, clk := newTestSource(t)
	a1, a2, z := object{Name: "a", Version: 1}, object{Name: "a", Version: 2}, object{Name: "z"}
	b.set(a1, z, a2)
	entries, rev := list(t, s, b)
	assert.Equal(t, []informer.Entry[string, object]{{Key: "a", Value: a2}, {Key: "z", Value: z}}, entries)
	assert.Equal(t, informer.Revision(2), rev)

	w := watch(t, s, rev)
	a3 := object{Name: "a", Version: 3}
	b.set(a2, a3, z, a3)
	assert.Equal(t, []event{{Type: informer.Put, Key: "a", Value: a3, Revision: 3}, bookmark(3)}, pollOnce(t, w, b, clk))
}

func TestTheDefaultEqualityShouldCompareValuesDeeply(t *testing.T) {
	s, b, clk := newTestSource(t)
	b.set(object{Name: "a", Labels: []string{"x"}})
	_, rev := list(t, s, b)
	w := watch(t, s, rev)

	b.set(object{Name: "a", Labels: []string{"x"}}) // a new slice, equal
	assert.Empty(t, pollOnce(t, w, b, clk))
	changed := object{Name: "a", Labels: []string{"y"}}
	b.set(changed)
	assert.Equal(t, []event{{Type: informer.Put, Key: "a", Value: changed, Revision: 2}, bookmark(2)}, pollOnce(t, w, b, clk))
}

func TestWithEqualShouldDecideWhatIsAChange(t *testing.T) {
	sameVersion := func(a, b object) bool { return a.Version == b.Version }
	s, b, clk := newTestSource(t, poll.WithEqual(sameVersion))
	b.set(object{Name: "a", Version: 1})
	_, rev := list(t, s, b)
	w := watch(t, s, rev)

	b.set(object{Name: "a", Version: 1, Labels: []string{"ignored"}})
	assert.Empty(t, pollOnce(t, w, b, clk))
	v2 := object{Name: "a", Version: 2}
	b.set(v2)
	assert.Equal(t, []event{{Type: informer.Put, Key: "a", Value: v2, Revision: 2}, bookmark(2)}, pollOnce(t, w, b, clk))
}

func TestWatchAfterAnotherRevisionThanTheLatestListShouldExpireWithoutListing(t *testing.T) {
	s, b, _ := newTestSource(t)
	b.set(object{Name: "a"}, object{Name: "b"})
	_, rev := list(t, s, b)
	for _, after := range []informer.Revision{0, rev - 1, rev + 1} {
		err := s.Watch(context.Background(), after, func(event) error { return nil })
		assert.ErrorIs(t, err, informer.ErrRevisionExpired, "after %d", after)
	}
	assert.Empty(t, b.listed, "no list for a watch that cannot work")
}

func TestAListWhileAWatchWaitsShouldExpireTheWatchAtItsNextPoll(t *testing.T) {
	s, b, clk := newTestSource(t)
	b.set(object{Name: "a"})
	_, rev := list(t, s, b)
	w := watch(t, s, rev)
	awaitTimer(t, clk)

	b.set(object{Name: "a"}, object{Name: "b"})
	list(t, s, b) // someone relists: the watch's revision is stale
	clk.Step(interval)
	assert.ErrorIs(t, w.result(t), informer.ErrRevisionExpired)
	assert.Empty(t, w.events, "the changes went to the List, not to the stale watch")
}

func TestAListErrorShouldEndWatchWithTheErrorWrapped(t *testing.T) {
	s, b, clk := newTestSource(t)
	_, rev := list(t, s, b)
	w := watch(t, s, rev)
	unavailable := errors.New("503 Service Unavailable")
	b.fail(unavailable)
	awaitTimer(t, clk)
	clk.Step(interval)

	err := w.result(t)
	require.ErrorIs(t, err, unavailable)
	assert.EqualError(t, err, "poll: watch after revision 0: list: 503 Service Unavailable")
}

func TestAWatchResumedAfterTheLastCompletePollShouldNotExpireAfterAListError(t *testing.T) {
	// An informer resumes a failed watch after the last revision it knows
	// to be complete: that of the last bookmark, or one before its last
	// event without one. Resuming there must not expire (relisting would
	// re-deliver every key), so a poll that found changes must end with a
	// bookmark at its last revision.
	s, b, clk := newTestSource(t)
	b.set(object{Name: "a"})
	_, rev := list(t, s, b)
	w := watch(t, s, rev)
	b.set(object{Name: "a"}, object{Name: "b"})
	events := pollOnce(t, w, b, clk)
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	require.Equal(t, informer.Bookmark, last.Type, "the poll ends with a bookmark: %v", events)
	resume := last.Revision

	b.fail(errors.New("timeout"))
	awaitTimer(t, clk)
	clk.Step(interval)
	require.Error(t, w.result(t))
	b.awaitList(t)

	b.fail(nil)
	b.set(object{Name: "a"}, object{Name: "b"}, object{Name: "c"})
	w = watch(t, s, resume)
	assert.Equal(t, []event{{Type: informer.Put, Key: "c", Value: object{Name: "c"}, Revision: 3}, bookmark(3)}, pollOnce(t, w, b, clk))
}

func TestListShouldReturnTheListErrorWrapped(t *testing.T) {
	s, b, _ := newTestSource(t)
	unavailable := errors.New("503 Service Unavailable")
	b.fail(unavailable)
	_, _, err := s.List(context.Background())
	require.ErrorIs(t, err, unavailable)
	assert.EqualError(t, err, "poll: list: 503 Service Unavailable")
}

func TestWatchShouldReturnPromptlyWhenItsContextIsCancelled(t *testing.T) {
	s, _, clk := newTestSource(t)
	w := watch(t, s, 0)
	awaitTimer(t, clk)
	w.cancel()
	assert.ErrorIs(t, w.result(t), context.Canceled)
	assert.False(t, clk.HasWaiters(), "the timer was stopped")
}

func TestWatchShouldReturnTheContextErrorWhenTheListFailsBecauseOfIt(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	list := func(ctx context.Context) ([]object, error) {
		cancel() // the caller gives up while the list is in flight
		return nil, ctx.Err()
	}
	s := must.Do(poll.New(list, name, poll.WithClock(clk), poll.WithJitter(0)))
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, 0, func(event) error { return nil }) }()
	awaitTimer(t, clk)
	clk.Step(poll.DefaultInterval)
	assert.Same(t, context.Canceled, <-done)
}

func TestWatchShouldReturnTheErrorOfEmit(t *testing.T) {
	s, b, clk := newTestSource(t)
	b.set(object{Name: "a"}, object{Name: "b"})
	stop := errors.New("stop")
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(context.Background(), 0, func(event) error {
			calls++
			return stop
		})
	}()
	awaitTimer(t, clk)
	clk.Step(interval)
	assert.Same(t, stop, <-done)
	assert.Equal(t, 1, calls, "no event after the failing one")
}
