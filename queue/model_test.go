package queue_test

// A reference model of the queue, and the driver that runs one operation on
// both the model and a real queue and compares what can be observed. The
// property test (property_test.go) and the fuzz test (fuzz_test.go) only
// choose operations; everything else is shared.
//
// The model is written for obviousness, not speed: slices and maps, linear
// scans. It follows doc.go, and where doc.go leaves a choice open (how a
// re-add while processing merges priorities), what queue.go does.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// modelKeys is the small key space the operations draw from: few keys, so
// that merges, re-adds and ties are common. modelGroup puts them in three
// fairness groups.
var modelKeys = []string{"a1", "a2", "b1", "b2", "c1", "c2"}

func modelGroup(key string) string { return key[:1] }

// The rate limiter of the model-based tests: no jitter, so When is
// Base*2^n capped at Cap, deterministically.
const (
	modelLimiterBase = time.Second
	modelLimiterCap  = time.Minute
)

func newModelLimiter() *backoff.PerKey[string] {
	return backoff.NewPerKey[string](backoff.Exponential{Base: modelLimiterBase, Cap: modelLimiterCap})
}

// modelState is where a key is; a key the model does not hold is absent.
type modelState uint8

const (
	mReady      modelState = iota + 1 // in a ready line, Get may hand it out
	mWaiting                          // waiting for its due time
	mProcessing                       // a worker holds it; may have a pending delayed add
	mDirty                            // a worker holds it and it was added again: ready at Done
)

type modelKey struct {
	state modelState
	// prio is the priority the key is ready at (mReady), or that of the add
	// waiting to happen (mWaiting, mDirty, mProcessing with pending).
	prio int32
	// pending: a delayed add waits for due. Always true for mWaiting; true
	// for mProcessing after an AddAfter while processing.
	pending bool
	due     time.Duration
	// setAt orders keys due at the same time: when due was last set.
	setAt int
}

// modelLevel is one priority's ready keys: a FIFO per group, and the ring of
// groups that have ready keys, in serving order.
type modelLevel struct {
	ring []string
	fifo map[string][]string
}

type model struct {
	grouped  bool
	now      time.Duration // since the queue was made
	sets     int           // counts due times set, for modelKey.setAt
	shutdown bool
	keys     map[string]*modelKey
	levels   map[int32]*modelLevel
	failures map[string]int // the rate limiter's per-key failure count
}

func newModel(grouped bool) *model {
	return &model{
		grouped:  grouped,
		keys:     map[string]*modelKey{},
		levels:   map[int32]*modelLevel{},
		failures: map[string]int{},
	}
}

func (m *model) group(key string) string {
	if m.grouped {
		return modelGroup(key)
	}
	return ""
}

// pushReady puts key at the back of its group's line in priority prio; a
// group that had no ready keys there joins the back of the ring.
func (m *model) pushReady(key string, prio int32) {
	l := m.levels[prio]
	if l == nil {
		l = &modelLevel{fifo: map[string][]string{}}
		m.levels[prio] = l
	}
	g := m.group(key)
	if len(l.fifo[g]) == 0 {
		l.ring = append(l.ring, g)
	}
	l.fifo[g] = append(l.fifo[g], key)
	m.keys[key] = &modelKey{state: mReady, prio: prio}
}

// removeReady takes a ready key out of its line; a group left without ready
// keys leaves the ring.
func (m *model) removeReady(key string) {
	k := m.keys[key]
	l, g := m.levels[k.prio], m.group(key)
	l.fifo[g] = slices.DeleteFunc(l.fifo[g], func(s string) bool { return s == key })
	if len(l.fifo[g]) == 0 {
		l.ring = slices.DeleteFunc(l.ring, func(s string) bool { return s == g })
	}
	delete(m.keys, key)
}

// setDue gives a pending add the due time d; an earlier one already set wins.
func (m *model) setDue(k *modelKey, d time.Duration) {
	if k.pending && k.due <= d {
		return
	}
	m.sets++
	k.pending, k.due, k.setAt = true, d, m.sets
}

// add is one key of any add: delay <= 0 means now.
func (m *model) add(key string, prio int32, delay time.Duration) {
	if m.shutdown {
		return // adds are ignored
	}
	now := delay <= 0
	k := m.keys[key]
	if k == nil {
		if now {
			m.pushReady(key, prio)
			return
		}
		k = &modelKey{state: mWaiting, prio: prio}
		m.keys[key] = k
		m.setDue(k, m.now+delay)
		return
	}
	switch k.state {
	case mReady:
		// Already ready: a delay cannot make it later. A higher priority
		// moves it to the back of the higher line.
		if prio > k.prio {
			m.removeReady(key)
			m.pushReady(key, prio)
		}
	case mWaiting:
		prio = max(prio, k.prio)
		if now {
			m.pushReady(key, prio) // ready now, once: the delay is cancelled
			return
		}
		k.prio = prio
		m.setDue(k, m.now+delay)
	case mProcessing:
		// Without a pending add the re-add takes its own priority (the one
		// being processed has been consumed); with one, the two merge.
		if k.pending {
			prio = max(prio, k.prio)
		}
		k.prio = prio
		if now {
			k.state, k.pending = mDirty, false
			return
		}
		m.setDue(k, m.now+delay)
	case mDirty:
		// It runs again at Done anyway: only the priority can change.
		k.prio = max(prio, k.prio)
	}
}

// when is the rate limiter's When: Base*2^n capped, then n+1.
func (m *model) when(key string) time.Duration {
	n := m.failures[key]
	m.failures[key] = n + 1
	d := modelLimiterBase
	for range n {
		if d >= modelLimiterCap {
			break
		}
		d *= 2
	}
	return min(d, modelLimiterCap)
}

func (m *model) addWithOptions(o queue.AddOptions, keys ...string) {
	prio := int32(min(max(o.Priority, math.MinInt32), math.MaxInt32))
	for _, key := range keys {
		delay := o.After
		if o.RateLimited && !m.shutdown {
			// An add that will be ignored counts no failure.
			delay = max(delay, m.when(key))
		}
		m.add(key, prio, delay)
	}
}

// promote makes every pending add that is due happen, earliest due first,
// ties in the order the times were set. After shutdown nothing fires.
func (m *model) promote() {
	if m.shutdown {
		return
	}
	var due []string
	for key, k := range m.keys {
		if k.pending && k.due <= m.now {
			due = append(due, key)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := m.keys[due[i]], m.keys[due[j]]
		if a.due != b.due {
			return a.due < b.due
		}
		return a.setAt < b.setAt
	})
	for _, key := range due {
		k := m.keys[key]
		k.pending = false
		if k.state == mWaiting {
			m.pushReady(key, k.prio)
		} else {
			k.state = mDirty
		}
	}
}

func (m *model) step(d time.Duration) {
	m.now += d
	m.promote()
}

func (m *model) len() int {
	m.promote()
	n := 0
	for _, k := range m.keys {
		if k.state == mReady {
			n++
		}
	}
	return n
}

// canGet reports whether Get would return at once.
// shutDown makes due keys ready first: being due is being ready, whether or
// not anything has moved the key yet.
func (m *model) shutDown() {
	m.promote()
	m.shutdown = true
}

func (m *model) canGet() bool { return m.shutdown || m.len() > 0 }

// get is Get when canGet: the highest priority, the group at the front of
// its ring (which moves to the back if it has more), the oldest key there.
func (m *model) get() (key string, shutdown bool) {
	m.promote()
	top, found := int32(0), false
	for p, l := range m.levels {
		if len(l.ring) > 0 && (!found || p > top) {
			top, found = p, true
		}
	}
	if !found {
		if !m.shutdown {
			panic("model: get would block")
		}
		return "", true
	}
	l := m.levels[top]
	g := l.ring[0]
	key = l.fifo[g][0]
	m.removeReady(key) // takes g out of the ring if it empties
	if len(l.fifo[g]) > 0 {
		l.ring = append(l.ring[1:], g)
	}
	m.keys[key] = &modelKey{state: mProcessing}
	return key, false
}

func (m *model) done(key string) {
	k := m.keys[key]
	switch {
	case k == nil || (k.state != mProcessing && k.state != mDirty):
		// Done of a key that is not processing does nothing.
	case k.state == mDirty:
		m.pushReady(key, k.prio) // even after shutdown
	case k.pending:
		k.state = mWaiting
	default:
		delete(m.keys, key)
	}
}

// busy lists the keys a worker holds, sorted.
func (m *model) busy() []string {
	var keys []string
	for key, k := range m.keys {
		if k.state == mProcessing || k.state == mDirty {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// opKind names one operation on the queue.
type opKind uint8

const (
	opAdd opKind = iota
	opAddAfter
	opAddWithOptions
	opAddRateLimited
	opGet
	opDone
	opForget
	opStep
	opShutDown
	opShutDownWithDrain
)

// op is one operation. keys holds one key except for AddWithOptions; d is
// AddAfter's delay or Step's.
type op struct {
	kind opKind
	keys []string
	d    time.Duration
	opts queue.AddOptions
}

var opNames = [...]string{"Add", "AddAfter", "AddWithOptions", "AddRateLimited", "Get", "Done",
	"Forget", "clock.Step", "ShutDown", "ShutDownWithDrain"}

func (o op) String() string {
	name := opNames[o.kind]
	switch o.kind {
	case opAddAfter:
		return fmt.Sprintf("%s(%q, %v)", name, o.keys[0], o.d)
	case opAddWithOptions:
		return fmt.Sprintf("%s({After: %v, RateLimited: %v, Priority: %d}, %q)",
			name, o.opts.After, o.opts.RateLimited, o.opts.Priority, o.keys)
	case opStep:
		return fmt.Sprintf("%s(%v)", name, o.d)
	case opGet, opShutDown, opShutDownWithDrain:
		return name + "()"
	}
	return fmt.Sprintf("%s(%q)", name, o.keys[0])
}

// GoString makes rapid's log of drawn values readable.
func (o op) GoString() string     { return o.String() }
func (k opKind) GoString() string { return opNames[k] }

// modelTB is what the driver needs of *testing.T and *rapid.T.
type modelTB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// modelHarness drives a real queue on a fake clock and the model side by
// side.
type modelHarness struct {
	t       modelTB
	q       *queue.Queue[string]
	clk     *clocktesting.FakeClock
	m       *model
	metrics bool
	history []string // the operations run so far, with what Get returned
}

// newModelHarness makes the queue, with fairness groups if grouped and with
// metrics if metrics (which link keys in flight through the same entries).
func newModelHarness(t modelTB, grouped, metrics bool) *modelHarness {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	// The model has strict priorities: ageing has tests of its own
	// (ageing_test.go), and a model of its stamps would restate the code.
	opts := []queue.Option{queue.WithClock(clk), queue.WithRateLimiter[string](newModelLimiter()), queue.WithAgeing(queue.NoAgeing)}
	if grouped {
		opts = append(opts, queue.WithGroup(modelGroup))
	}
	if metrics {
		m, err := queue.NewMetrics(prometheus.NewRegistry(), "model", "")
		if err != nil {
			t.Fatalf("NewMetrics: %v", err)
		}
		opts = append(opts, queue.WithMetrics(m))
	}
	q := must.Do(queue.New[string](opts...))
	t.Cleanup(q.ShutDown)
	return &modelHarness{t: t, q: q, clk: clk, m: newModel(grouped), metrics: metrics}
}

func (h *modelHarness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("queue and model disagree after (groups %v, metrics %v):\n\t%s\n"+format,
		append([]any{h.m.grouped, h.metrics, strings.Join(h.history, "\n\t")}, args...)...)
}

// run applies o to the queue and the model and compares them. An operation
// that could block the test (a Get with nothing ready, a drain with keys in
// flight) is skipped.
func (h *modelHarness) run(o op) {
	h.t.Helper()
	entry := o.String()
	switch o.kind {
	case opAdd:
		h.q.Add(o.keys[0])
		h.m.add(o.keys[0], queue.PriorityNormal, 0)
	case opAddAfter:
		h.q.AddAfter(o.keys[0], o.d)
		h.m.add(o.keys[0], queue.PriorityNormal, o.d)
	case opAddWithOptions:
		h.q.AddWithOptions(o.opts, o.keys...)
		h.m.addWithOptions(o.opts, o.keys...)
	case opAddRateLimited:
		h.q.AddRateLimited(o.keys[0])
		h.m.addWithOptions(queue.AddOptions{RateLimited: true}, o.keys[0])
	case opGet:
		if !h.m.canGet() {
			return
		}
		if got, want := h.q.Len(), h.m.len(); got != want {
			h.fatalf("before Get: Len() = %d, model says %d", got, want)
		}
		key, shutdown := h.q.Get()
		wantKey, wantShutdown := h.m.get()
		entry = fmt.Sprintf("Get() = %q, %v", key, shutdown)
		if key != wantKey || shutdown != wantShutdown {
			h.history = append(h.history, entry)
			h.fatalf("Get() = %q, %v; model says %q, %v", key, shutdown, wantKey, wantShutdown)
		}
	case opDone:
		h.q.Done(o.keys[0])
		h.m.done(o.keys[0])
	case opForget:
		h.q.Forget(o.keys[0])
		delete(h.m.failures, o.keys[0])
	case opStep:
		h.clk.Step(o.d)
		h.m.step(o.d)
	case opShutDown:
		h.q.ShutDown()
		h.m.shutDown()
	case opShutDownWithDrain:
		if len(h.m.busy()) > 0 {
			return
		}
		h.q.ShutDownWithDrain()
		h.m.shutDown()
	}
	h.history = append(h.history, entry)
	h.check()
}

// check compares everything observable without blocking. Len comes first:
// it promotes due keys itself, so the timer goroutine can change nothing
// afterwards. (This also means no key is ever due but not yet promoted when
// the next operation runs, ShutDown included.)
func (h *modelHarness) check() {
	h.t.Helper()
	if got, want := h.q.Len(), h.m.len(); got != want {
		h.fatalf("Len() = %d; model says %d", got, want)
	}
	if got := h.q.ShuttingDown(); got != h.m.shutdown {
		h.fatalf("ShuttingDown() = %v; model says %v", got, h.m.shutdown)
	}
	for _, key := range modelKeys {
		if got, want := h.q.NumRequeues(key), h.m.failures[key]; got != want {
			h.fatalf("NumRequeues(%q) = %d; model says %d", key, got, want)
		}
	}
}

// finish gives back every key in flight and takes every ready key, checking
// the order, so that state the last operations left behind is compared too.
func (h *modelHarness) finish() {
	h.t.Helper()
	for range 4 * len(modelKeys) {
		for _, key := range h.m.busy() {
			h.run(op{kind: opDone, keys: []string{key}})
		}
		if h.m.len() == 0 {
			return
		}
		h.run(op{kind: opGet})
	}
}
