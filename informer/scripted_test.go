package informer_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is how long a test waits for something that should happen at once.
const wait = 5 * time.Second

// script is a Source that the test drives by hand: every List takes the
// next reply the test queues, and every Watch hands the test a watchCall
// through which it sends events and ends the watch.
type script struct {
	lists   chan listReply
	watches chan *watchCall
}

type listReply struct {
	entries []informer.Entry[string, int]
	rev     informer.Revision
	err     error
}

type watchCall struct {
	after  informer.Revision
	events chan sent
	end    chan error
}

type sent struct {
	ev   informer.Event[string, int]
	done chan struct{}
}

func newScript() *script {
	return &script{lists: make(chan listReply, 16), watches: make(chan *watchCall)}
}

func (s *script) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	select {
	case r := <-s.lists:
		return r.entries, r.rev, r.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (s *script) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, int]) error) error {
	c := &watchCall{after: after, events: make(chan sent), end: make(chan error, 1)}
	select {
	case s.watches <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		select {
		case e := <-c.events:
			err := emit(e.ev)
			informer.WaitApplied(ctx)
			close(e.done)
			if err != nil {
				return err
			}
		case err := <-c.end:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// list queues a successful list reply of the given entries.
func (s *script) list(rev informer.Revision, kv map[string]int) {
	var entries []informer.Entry[string, int]
	for k, v := range kv {
		entries = append(entries, informer.Entry[string, int]{Key: k, Value: v})
	}
	s.lists <- listReply{entries: entries, rev: rev}
}

// nextWatch returns the next Watch call, failing the test if none comes.
func (s *script) nextWatch(t *testing.T) *watchCall {
	t.Helper()
	select {
	case c := <-s.watches:
		return c
	case <-time.After(wait):
		require.FailNow(t, "no Watch call")
		return nil
	}
}

// put emits a Put and returns once the informer has applied it.
func (c *watchCall) put(t *testing.T, key string, v int, rev informer.Revision) {
	t.Helper()
	c.send(t, informer.Event[string, int]{Type: informer.Put, Key: key, Value: v, Revision: rev})
}

// del emits a Delete (without a value) and returns once it is applied.
func (c *watchCall) del(t *testing.T, key string, rev informer.Revision) {
	t.Helper()
	c.send(t, informer.Event[string, int]{Type: informer.Delete, Key: key, Revision: rev})
}

func (c *watchCall) send(t *testing.T, ev informer.Event[string, int]) {
	t.Helper()
	done := make(chan struct{})
	select {
	case c.events <- sent{ev: ev, done: done}:
	case <-time.After(wait):
		require.FailNow(t, "watch is not receiving")
	}
	<-done
}

// call is one handler call, as a recorder saw it.
type call struct {
	Op          string // "add", "update", "delete"
	Key         string
	Old, New    int // New is the value for add, the last value for delete
	InitialList bool
	Resync      bool // an update no watch event went into
}

// recorder is a Handler that records its calls and keeps the view they
// describe. If gate is set, every call first waits for a receive from it;
// if slow is set, every call sleeps that long. It checks that every call
// starts from the view the earlier calls built (an add of a key the
// handler does not have, an update or delete of one it has, with old as
// the value it was given), and records violations.
type recorder struct {
	gate chan struct{}
	slow time.Duration

	mu         sync.Mutex
	calls      []call
	view       map[string]int
	violations []string
}

func newRecorder() *recorder { return &recorder{view: map[string]int{}} }

func (r *recorder) OnAdd(key string, v int, initialList bool) {
	r.record(call{Op: "add", Key: key, New: v, InitialList: initialList}, func() { r.view[key] = v })
}

func (r *recorder) OnUpdate(key string, old, new int, resync bool) {
	r.record(call{Op: "update", Key: key, Old: old, New: new, Resync: resync}, func() { r.view[key] = new })
}

func (r *recorder) OnDelete(key string, last int) {
	r.record(call{Op: "delete", Key: key, New: last}, func() { delete(r.view, key) })
}

func (r *recorder) record(c call, apply func()) {
	if r.gate != nil {
		<-r.gate
	}
	if r.slow > 0 {
		time.Sleep(r.slow)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	had, ok := r.view[c.Key]
	switch {
	case c.Op == "add" && ok:
		r.violations = append(r.violations, fmt.Sprintf("%+v: the handler has it, with %d", c, had))
	case c.Op != "add" && !ok:
		r.violations = append(r.violations, fmt.Sprintf("%+v: the handler does not have it", c))
	case c.Op == "update" && had != c.Old:
		r.violations = append(r.violations, fmt.Sprintf("%+v: the handler had %d", c, had))
	}
	apply()
}

func (r *recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

func (r *recorder) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *recorder) View() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.view)
}

// waitCalls waits until r has recorded n calls and returns them.
func (r *recorder) waitCalls(t *testing.T, n int) []call {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.Calls()) >= n }, wait, time.Millisecond,
		"want %d calls", n)
	return r.Calls()
}

// start runs inf until the test ends, and fails the test if Run fails or
// does not return.
func start[K comparable, V any](t *testing.T, inf *informer.Informer[K, V]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(wait):
				require.FailNow(t, "Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// cacheMap returns the informer's cache as a map.
func cacheMap(inf *informer.Informer[string, int]) map[string]int { return cacheOf(inf) }

// cacheOf returns an informer's cache as a map.
func cacheOf[K comparable, V any](inf *informer.Informer[K, V]) map[K]V {
	m := map[K]V{}
	for _, e := range inf.List() {
		m[e.Key] = e.Value
	}
	return m
}
