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

// This test compacts the shared etcd, so it does not run in parallel.
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
	src := &pausable{Source: etcdstore.New[item](cli, prefix)}
	logs := &lockedWriter{w: new(bytes.Buffer), mu: new(sync.Mutex)}
	inf := informer.New[string, item]("undecodable", src, informer.WithClock(clk),
		informer.WithWatchBackoff(backoff.Exponential{Base: time.Second, Cap: time.Second}),
		informer.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	var mu sync.Mutex
	var calls []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, s)
	}
	_, err = inf.AddHandler(informer.HandlerFuncs[string, item]{
		AddFunc: func(k string, v item, _ bool) { record("add " + k + " " + strconv.Itoa(v.N)) },
		UpdateFunc: func(k string, o, v item, _ bool) {
			record("update " + k + " " + strconv.Itoa(o.N) + "->" + strconv.Itoa(v.N))
		},
		DeleteFunc: func(k string, _ item) { record("delete " + k) },
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-ran)
	})
	require.NoError(t, inf.WaitForSync(ctx))

	// The watch is down, waiting out its backoff, while a bad value is
	// written and the revision it would resume from is compacted away.
	src.drop(t)
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
	resp, err := cli.Put(ctx, prefix+"a", "not json")
	require.NoError(t, err)
	bad := resp.Header.Revision
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
	stepUntil(func() bool { return inf.Stats().ListErrors >= 2 }, "the relist fails on the bad value, and is retried")
	st := inf.Stats()
	assert.Equal(t, uint64(1), st.Expired, "the compaction expired the watch: %+v", st)
	assert.Equal(t, uint64(1), st.Lists, "no relist succeeded: %+v", st)
	v, ok := inf.Get("a")
	assert.True(t, ok, "the key stays in the cache")
	assert.Equal(t, item{N: 1}, v, "with its last good value")
	assert.Contains(t, logs.string(), `key \"a\" at mod revision `+strconv.FormatInt(bad, 10))

	_, err = c.Put(ctx, "a", item{N: 2}) // fixed
	require.NoError(t, err)
	stepUntil(func() bool { v, _ := inf.Get("a"); return v.N == 2 }, "the informer recovers")
	// The relist that recovers re-delivers every key, changed or not.
	want := []string{"add a 1", "add b 1", "update a 1->2", "update b 1->1"}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == len(want)
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(calls)
	assert.Equal(t, want, calls, "never a delete")
	assert.Equal(t, uint64(2), inf.Stats().Lists)
}

// string returns what was written so far.
func (l *lockedWriter) string() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
