package informer_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

// revRecorder is a recorder that is also a RevisionHandler: each call it
// records carries the revision it was told right before it.
type revRecorder struct {
	*recorder
	mu   sync.Mutex
	next informer.Revision
	revs []revCall
}

type revCall struct {
	Op  string
	Key string
	Rev informer.Revision
}

var _ informer.RevisionHandler = (*revRecorder)(nil)

func newRevRecorder() *revRecorder { return &revRecorder{recorder: newRecorder()} }

func (r *revRecorder) ChangeRevision(rev informer.Revision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = rev
}

func (r *revRecorder) note(op, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revs = append(r.revs, revCall{op, key, r.next})
	r.next = 0 // each call must be told its own
}

func (r *revRecorder) OnAdd(key string, v int, initialList bool) {
	r.note("add", key)
	r.recorder.OnAdd(key, v, initialList)
}

func (r *revRecorder) OnUpdate(key string, old, new int, resync bool) {
	r.note("update", key)
	r.recorder.OnUpdate(key, old, new, resync)
}

func (r *revRecorder) OnDelete(key string, last int) {
	r.note("delete", key)
	r.recorder.OnDelete(key, last)
}

func (r *revRecorder) Revs() []revCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.revs)
}

func TestARevisionHandlerIsToldEachChangesOwnRevisionNotTheInformers(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet))
	h := newRevRecorder()
	h.gate = make(chan struct{}, 16)
	_, err := inf.AddHandler(h)
	require.NoError(t, err)
	src.list(10, map[string]int{"a": 1})
	start(t, inf)
	w := src.nextWatch(t)

	// The handler is held in its first call, the add of a, while the
	// informer moves on: when it is given b's change, the informer is at
	// 17, well past b's revision.
	w.put(t, "b", 1, 12)
	w.put(t, "a", 2, 13)
	w.put(t, "b", 2, 14) // b is still pending: coalesced with its add
	w.put(t, "c", 1, 15)
	w.del(t, "c", 16) // c's add and delete coalesce into nothing
	w.put(t, "d", 1, 17)
	require.Equal(t, informer.Revision(17), inf.LastRevision())
	for range 4 {
		h.gate <- struct{}{}
	}

	h.waitCalls(t, 4)
	assert.Equal(t, []revCall{
		{"add", "a", 10}, // the list's
		{"add", "b", 14}, // the latest of the two coalesced
		{"update", "a", 13},
		{"add", "d", 17},
	}, h.Revs())

	w.del(t, "b", 18)
	h.gate <- struct{}{}
	h.waitCalls(t, 5)
	assert.Equal(t, revCall{"delete", "b", 18}, h.Revs()[4])
	assert.Empty(t, h.Violations())
}

func TestListsResyncsAndReplaysTellTheRevisionOfTheValueDelivered(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := newScript()
	inf := must.Do(informer.New[string, int]("t", src, quiet, informer.WithClock(clk), informer.WithResync(time.Minute)))
	early := newRevRecorder()
	_, err := inf.AddHandler(early)
	require.NoError(t, err)
	src.list(10, map[string]int{"a": 1, "b": 1})
	start(t, inf)
	w := src.nextWatch(t)
	early.waitCalls(t, 2)
	for _, c := range early.Revs() {
		assert.Equal(t, informer.Revision(10), c.Rev, "initial add of %s: the list's revision", c.Key)
	}
	w.put(t, "a", 2, 11)
	early.waitCalls(t, 3)
	w.put(t, "z", 1, 20) // the informer moves past a's revision

	late := newRevRecorder()
	_, err = inf.AddHandler(late)
	require.NoError(t, err)
	byKey := func(cs []revCall) []revCall {
		cs = slices.Clone(cs)
		slices.SortFunc(cs, func(x, y revCall) int { return compareStrings(x.Key, y.Key) })
		return cs
	}
	late.waitCalls(t, 3)
	assert.Equal(t, []revCall{{"add", "a", 11}, {"add", "b", 10}, {"add", "z", 20}}, byKey(late.Revs()),
		"a replay tells each value's own revision")

	early.waitCalls(t, 4)
	require.Eventually(t, clk.HasWaiters, wait, time.Millisecond) // the resync ticker
	clk.Step(time.Minute)
	calls := early.waitCalls(t, 7)
	require.Len(t, calls, 7)
	assert.Equal(t, []revCall{{"update", "a", 11}, {"update", "b", 10}, {"update", "z", 20}}, byKey(early.Revs()[4:]),
		"a resync tells the revision at which each value was cached")
}
