package informer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// logBuffer is a slog text handler's output, safe to read while the
// informer writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) option() informer.Option {
	return informer.WithLogger(slog.New(slog.NewTextHandler(b, nil)))
}

func TestNewShouldReturnAnErrorNamingTheInformerOnANilSource(t *testing.T) {
	inf, err := informer.New[string, int]("jobs", nil)
	assert.EqualError(t, err, `informer.New("jobs"): nil Source <nil>`)
	assert.Nil(t, inf)
	var store *memstore.Store[string, int]
	_, err = informer.New[string, int]("jobs", store)
	assert.EqualError(t, err, `informer.New("jobs"): nil Source *memstore.Store[string,int]`)
}

func TestHasIndexShouldSayWhichNamesByIndexAccepts(t *testing.T) {
	inf := must.Do(informer.New("t", newScript(), quiet, informer.WithIndex("parity", parity)))
	assert.True(t, inf.HasIndex("parity"))
	assert.False(t, inf.HasIndex("typo"))
	assert.NotPanics(t, func() { inf.ByIndex("parity", "odd") })
}

// panicky is a handler that panics on the key "bad" and records the rest.
type panicky struct{ *recorder }

func (p panicky) OnAdd(key string, v int, initialList bool) {
	if key == "bad" {
		panic("boom on add")
	}
	p.recorder.OnAdd(key, v, initialList)
}

func (p panicky) OnUpdate(key string, old, new int, resync bool) {
	if key == "bad" {
		panic("boom on update")
	}
	p.recorder.OnUpdate(key, old, new, resync)
}

func TestAHandlerThatPanicsShouldBeRecoveredLoggedCountedAndGetTheNextChange(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, logs.option()))
	h, other := panicky{newRecorder()}, newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	_, err = inf.AddHandler(other)
	require.NoError(t, err)
	src.list(1, map[string]int{"bad": 1})
	start(t, inf)
	w := src.nextWatch(t)
	w.put(t, "a", 1, 2)
	w.put(t, "bad", 2, 3)
	w.put(t, "b", 1, 4)

	want := map[string]int{"a": 1, "b": 1}
	require.Eventually(t, func() bool { return assertMapEqual(want, h.View()) }, wait, time.Millisecond,
		"the handler went on after each panic")
	other.waitCalls(t, 4)
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "bad": 2}, other.View(), "another handler is not affected")
	assert.Equal(t, uint64(2), inf.Stats().Panics)
	out := logs.String()
	assert.Contains(t, out, "OnAdd panicked: boom on add")
	assert.Contains(t, out, "OnUpdate panicked: boom on update")
	assert.Contains(t, out, "key=bad")
	assert.Contains(t, out, "robust_test.go", "the log has the panic's stack")
}

func TestAnIndexLookupThatPanicsInAHandlerShouldNotStopTheInformer(t *testing.T) {
	// reconcile.ByIndex with a typo in the index name does this on another
	// informer's dispatcher.
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	var calls []string
	var mu sync.Mutex
	_, err := inf.AddHandler(informer.HandlerFuncs[string, int]{AddFunc: func(k string, _ int, _ bool) {
		mu.Lock()
		calls = append(calls, k)
		mu.Unlock()
		inf.ByIndex("typo", k)
	}})
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	src.nextWatch(t).put(t, "b", 1, 2)
	require.Eventually(t, func() bool { return inf.Stats().Panics == 2 }, wait, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"a", "b"}, calls)
}

func TestATransformThatPanicsShouldSkipTheValueAndNeverDeleteTheKey(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New("t", src, logs.option(), informer.WithTransform(func(v int) int {
		if v == 13 {
			panic("unlucky")
		}
		return v
	})))
	h := newRecorder()
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(1, map[string]int{"a": 1, "b": 13}) // b is never seen
	start(t, inf)
	w := src.nextWatch(t)
	assert.Equal(t, map[string]int{"a": 1}, cacheMap(inf))
	w.put(t, "a", 13, 2)
	assert.Equal(t, map[string]int{"a": 1}, cacheMap(inf), "the cache keeps a's last value")
	w.put(t, "a", 2, 3)
	assert.Equal(t, map[string]int{"a": 2}, cacheMap(inf), "a's next change is taken")

	src.list(9, map[string]int{"a": 13, "c": 3}) // a relist
	w.end <- informer.ErrRevisionExpired
	w = src.nextWatch(t)
	assert.Equal(t, map[string]int{"a": 2, "c": 3}, cacheMap(inf), "a is listed, so it is not deleted")
	w.put(t, "a", 4, 10)
	assert.Equal(t, map[string]int{"a": 4, "c": 3}, cacheMap(inf), "a is current as of the relist")

	require.Eventually(t, func() bool { return assertMapEqual(map[string]int{"a": 4, "c": 3}, h.View()) }, wait, time.Millisecond)
	for _, c := range h.Calls() {
		assert.NotEqual(t, "delete", c.Op, "%+v", c)
	}
	assert.Empty(t, h.Violations())
	assert.Equal(t, uint64(3), inf.Stats().Panics)
	assert.Contains(t, logs.String(), "transform panicked: unlucky")
}

func TestAnIndexFuncThatPanicsShouldLeaveTheCacheAndItsIndexesAsTheyWere(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity),
		informer.WithIndex("picky", func(_ string, v int) []string {
			if v == 13 {
				panic("unlucky")
			}
			return []string{"any"}
		})))
	src.list(1, map[string]int{"a": 1, "b": 2})
	start(t, inf)
	w := src.nextWatch(t)
	w.put(t, "a", 13, 2) // the second index panics, after the first filed it
	w.put(t, "c", 13, 3)
	assert.Equal(t, map[string]int{"a": 1, "b": 2}, cacheMap(inf))
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("parity", "odd")))
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("parity", "even")))
	assert.Equal(t, []string{"a", "b"}, keysOf(inf.ByIndex("picky", "any")))
	w.del(t, "a", 4)
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("picky", "any")))
	assert.Empty(t, inf.ByIndex("parity", "odd"))
	assert.Equal(t, uint64(2), inf.Stats().Panics)
	assert.Equal(t, uint64(1), inf.Stats().Events)
}

func TestEventsThatBreakTheRevisionContractShouldBeCountedLoggedAndSkipped(t *testing.T) {
	var logs logBuffer
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, logs.option(),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: time.Millisecond})))
	src.list(10, map[string]int{"a": 1, "b": 1})
	start(t, inf)
	w := src.nextWatch(t)
	require.Equal(t, informer.Revision(10), w.after)

	w.put(t, "a", 1, 10) // a re-sent change at the list's revision: allowed
	w.put(t, "a", 2, 12)
	w.put(t, "a", 2, 12) // a duplicate: allowed
	w.del(t, "a", 12)    // not a duplicate of the Put at 12
	w.put(t, "a", 3, 11) // older than a's cached revision
	w.put(t, "b", 3, 5)  // below the revision the watch started after
	w.put(t, "c", 3, 9)
	w.del(t, "b", 7)
	w.del(t, "x", 10) // a re-sent delete at the list's revision: allowed
	w.put(t, "d", 4, 13)

	assert.Equal(t, map[string]int{"a": 2, "b": 1, "d": 4}, cacheMap(inf))
	st := inf.Stats()
	assert.Equal(t, uint64(5), st.Violations)
	assert.Equal(t, uint64(2), st.Events)
	assert.Equal(t, 1, strings.Count(logs.String(), "event skipped"), "one line per watch, not per event: %s", logs.String())

	w.end <- assert.AnError // the watch's summary is logged as it ends
	src.nextWatch(t)
	assert.Contains(t, logs.String(), "events skipped")
	assert.Contains(t, logs.String(), "count=5")
}

// swappable is a Source whose store can be replaced, as a program that
// restores its memory store from an old snapshot would.
type swappable struct {
	mu      sync.Mutex
	store   *memstore.Store[string, int]
	swapped chan struct{} // closed and replaced by swap
}

func (s *swappable) current() (*memstore.Store[string, int], chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store, s.swapped
}

func (s *swappable) swap(st *memstore.Store[string, int]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store = st
	close(s.swapped)
	s.swapped = make(chan struct{})
}

func (s *swappable) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	st, _ := s.current()
	return st.List(ctx)
}

// Watch watches the current store, and fails when it is replaced.
func (s *swappable) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	st, swapped := s.current()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-swapped:
			cancel(errors.New("store replaced"))
		case <-ctx.Done():
		}
	}()
	err := st.Watch(ctx, after, emit)
	if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && cause != context.Canceled {
		return cause
	}
	return err
}

func TestAnInformerWhoseStoreIsReplacedByOneAtALowerRevisionShouldRelistAndFollowIt(t *testing.T) {
	old := must.Do(memstore.New[string, int]())
	for i := range 10 {
		old.Put("k"+strconv.Itoa(i%3), i)
	}
	src := &swappable{store: old, swapped: make(chan struct{})}
	inf := must.Do(informer.New[string, int]("t", src, quiet,
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Millisecond, Cap: time.Millisecond})))
	start(t, inf)
	require.NoError(t, inf.WaitForSync(context.Background()))
	require.Eventually(t, func() bool { return inf.LastRevision() == 10 }, wait, time.Millisecond)

	restored := must.Do(memstore.New[string, int]())
	restored.Put("k0", 100)
	restored.Put("k9", 100) // revision 2
	src.swap(restored)
	require.Eventually(t, func() bool { return inf.Stats().Expired == 1 }, wait, time.Millisecond,
		"Watch after 10 on a store at 2 expires")
	// Revisions 3 to 12 again: none may be taken for a duplicate.
	for i := range 10 {
		restored.Put("k"+strconv.Itoa(i%2), 200+i)
	}
	want := map[string]int{"k0": 208, "k1": 209, "k9": 100}
	require.Eventually(t, func() bool { return assertMapEqual(want, cacheMap(inf)) }, wait, time.Millisecond)
	assert.Zero(t, inf.Stats().Violations)
}
