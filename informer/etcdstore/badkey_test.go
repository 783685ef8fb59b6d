package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// pausable is a Source whose running watch the test can drop: the
// informer then waits out its backoff, on a fake clock that only the test
// moves, so the test can compact past it meanwhile.
type pausable struct {
	informer.Source[string, item]

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the running watch, if any
}

var errDropped = errors.New("watch dropped by the test")

func (p *pausable) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, item]) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.mu.Lock()
	p.cancel = cancel
	p.mu.Unlock()
	err := p.Source.Watch(ctx, after, emit)
	if errors.Is(context.Cause(ctx), errDropped) {
		return errDropped
	}
	return err
}

// drop cancels the running watch, waiting for it to start: WaitForSync
// returns once the list is applied, which may be before Watch is called.
func (p *pausable) drop(t *testing.T) {
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cancel == nil {
			return false
		}
		p.cancel(errDropped)
		return true
	}, 10*time.Second, time.Millisecond, "the informer never started its watch")
}

// This test compacts the shared etcd, so it does not run in parallel. It
// goes through an informer, which takes a bad entry as a bad key.
func TestAnUndecodableValueShouldNeverDeleteTheKeyAcrossARelist(t *testing.T) {
	cli := etcdClient(t)
	ctx := ctxFor(t, 30*time.Second)
	prefix := uniquePrefix(t)
	c := &rawWriter{cli, prefix}
	_, err := c.Put(ctx, "a", item{N: 1})
	require.NoError(t, err)
	_, err = c.Put(ctx, "b", item{N: 1})
	require.NoError(t, err)

	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	src := &pausable{Source: must.Do(etcdstore.New[item](cli, prefix))}
	logs := &lockedWriter{w: new(bytes.Buffer), mu: new(sync.Mutex)}
	inf := must.Do(informer.New[string, item]("undecodable", src, informer.WithClock(clk),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Second, Cap: time.Second}),
		informer.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))))
	calls := &callLog{}
	_, err = inf.AddHandler(calls.handler())
	require.NoError(t, err)
	runInformer(t, inf)
	require.NoError(t, inf.WaitForSync(ctx))

	// The watch is down, waiting out its backoff, while a bad value is
	// written and the revision it would resume from is compacted away.
	src.drop(t)
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
	resp, err := cli.Put(ctx, prefix+"a", "not json")
	require.NoError(t, err)
	bad := informer.Revision(resp.Header.Revision)
	resp, err = cli.Put(ctx, prefix[:len(prefix)-1]+"-compact-probe", "x")
	require.NoError(t, err)
	_, err = cli.Compact(ctx, resp.Header.Revision)
	require.NoError(t, err)

	// stepUntil moves the clock past each backoff until cond holds.
	stepUntil := func(cond func() bool, msg string) {
		t.Helper()
		require.Eventually(t, func() bool {
			if cond() {
				return true
			}
			if clk.HasWaiters() {
				clk.Step(time.Second)
			}
			return false
		}, 10*time.Second, 5*time.Millisecond, msg)
	}
	stepUntil(func() bool { return inf.Stats().Lists >= 2 }, "the relist succeeds, the bad value included")
	st := inf.Stats()
	assert.Equal(t, uint64(1), st.Expired, "the compaction expired the watch: %+v", st)
	assert.Zero(t, st.ListErrors, "a bad value does not fail the list: %+v", st)
	v, ok := inf.Get("a")
	assert.True(t, ok, "the key stays in the cache")
	assert.Equal(t, item{N: 1}, v, "with its last good value")
	badKey, ok := inf.BadKey("a")
	if assert.True(t, ok, "the key is bad") {
		assert.Equal(t, bad, badKey.Revision)
		assert.True(t, badKey.HasValue)
		var decodeErr *etcdstore.DecodeError
		assert.ErrorAs(t, badKey.Err, &decodeErr)
	}
	assert.Contains(t, logs.string(), "at mod revision "+itoa(bad))

	_, err = c.Put(ctx, "a", item{N: 2}) // fixed
	require.NoError(t, err)
	stepUntil(func() bool { v, _ := inf.Get("a"); return v.N == 2 }, "the informer recovers")
	_, ok = inf.BadKey("a")
	assert.False(t, ok, "the key is good again")
	calls.waitFor(t, "a", "add a 1", "update a 1->2") // never a delete
	assert.NotContains(t, calls.of("b"), "delete b")
}

// Through an informer: while one key holds a bad value, every other key's
// changes arrive as they are written, not after a failed watch's backoff
// (the clock is fake and never moves, so a watch that failed would never
// resume), and the key recovers with its next good value.
func TestAnInformerShouldKeepEveryOtherKeyFlowingWhileOneKeyIsBad(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 30*time.Second)
	prefix := uniquePrefix(t)
	c := &rawWriter{cli, prefix}
	_, err := c.Put(ctx, "a", item{N: 1})
	require.NoError(t, err)

	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	inf := must.Do(informer.New[string, item]("bad-key", must.Do(etcdstore.New[item](cli, prefix)), informer.WithClock(clk),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Hour, Cap: time.Hour}),
		informer.WithLogger(slog.New(slog.DiscardHandler))))
	calls := &callLog{}
	_, err = inf.AddHandler(calls.handler())
	require.NoError(t, err)
	runInformer(t, inf)
	require.NoError(t, inf.WaitForSync(ctx))

	resp, err := cli.Put(ctx, prefix+"a", "not json")
	require.NoError(t, err)
	bad := informer.Revision(resp.Header.Revision)
	_, err = c.Put(ctx, "b", item{N: 1})
	require.NoError(t, err)
	last, err := c.Put(ctx, "c", item{N: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return inf.LastRevision() >= last }, 10*time.Second, time.Millisecond,
		"the other keys' changes arrive while a is bad: %+v", inf.Stats())
	calls.waitFor(t, "b", "add b 1")
	calls.waitFor(t, "c", "add c 1")
	// Handlers see changes in revision order, and a's bad value came
	// before b's and c's.
	assert.Equal(t, []string{"add a 1"}, calls.of("a"), "a keeps its last good value: no update, no delete")
	badKey, ok := inf.BadKey("a")
	if assert.True(t, ok, "a is bad") {
		assert.Equal(t, bad, badKey.Revision)
	}
	st := inf.Stats()
	assert.Zero(t, st.WatchErrors, "%+v", st)
	assert.Equal(t, uint64(1), st.BadKeys, "%+v", st)

	_, err = c.Put(ctx, "a", item{N: 2}) // fixed
	require.NoError(t, err)
	require.Eventually(t, func() bool { v, _ := inf.Get("a"); return v.N == 2 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, inf.BadKeys())
	calls.waitFor(t, "a", "add a 1", "update a 1->2")
}

// callLog records an informer's handler calls as "add k n",
// "update k o->n" and "delete k".
type callLog struct {
	mu    sync.Mutex
	calls map[string][]string // by key
}

func (l *callLog) record(key, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string][]string{}
	}
	l.calls[key] = append(l.calls[key], s)
}

// of returns key's calls so far.
func (l *callLog) of(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls[key])
}

// waitFor waits until key's calls are want, which handlers, called
// asynchronously, may not have made yet when the cache has the change.
func (l *callLog) waitFor(t *testing.T, key string, want ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, l.of(key))
	}, 10*time.Second, time.Millisecond)
}

func (l *callLog) handler() informer.HandlerFuncs[string, item] {
	return informer.HandlerFuncs[string, item]{
		AddFunc: func(k string, v item, _ bool) { l.record(k, "add "+k+" "+strconv.Itoa(v.N)) },
		UpdateFunc: func(k string, o, v item, _ bool) {
			l.record(k, "update "+k+" "+strconv.Itoa(o.N)+"->"+strconv.Itoa(v.N))
		},
		DeleteFunc: func(k string, _ item) { l.record(k, "delete "+k) },
	}
}

// runInformer runs inf until the test ends, and checks that Run then
// returns nil.
func runInformer(t *testing.T, inf *informer.Informer[string, item]) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-ran)
	})
}

// string returns what was written so far.
func (l *lockedWriter) string() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
