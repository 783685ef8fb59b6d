package etcdstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
)

// These tests kill, restart and compact the shared test servers, so they do
// not run in parallel with other tests.

func TestInformerShouldConvergeToEtcdWhileItsMemberIsKilledRestartedAndCompacted(t *testing.T) {
	member := testserver.EtcdMembers(t)[0]
	endpoints := testserver.Etcd(t)
	h := startHarness(t, endpoints, endpoints)

	h.pause(300 * time.Millisecond)
	member.Kill(t)
	h.pause(400 * time.Millisecond)
	member.Start(t)
	h.pause(300 * time.Millisecond)
	h.compact(endpoints)
	h.pause(300 * time.Millisecond)
	member.Kill(t)
	h.pause(200 * time.Millisecond)
	member.Start(t)
	h.pause(300 * time.Millisecond)

	h.stopWritersAndAssertConverged(endpoints)
	t.Logf("writes %d, informer stats %+v", h.writes.Load(), h.inf.Stats())
}

func TestInformerShouldConvergeToAnEtcdClusterThroughCompactionWhileCutOffAndALeaderKill(t *testing.T) {
	members := testserver.EtcdClusterMembers(t)
	all := testserver.EtcdCluster(t)
	// The informer talks to the first member only; the writers to all.
	watched, others := members[0], []string{members[1].Endpoint, members[2].Endpoint}
	h := startHarness(t, []string{watched.Endpoint}, all)

	// While the informer's member is down, the others go on and compact
	// its watch's revision away: it must relist when its member is back.
	h.pause(300 * time.Millisecond)
	watched.Kill(t)
	h.pause(300 * time.Millisecond)
	h.compact(others)
	h.pause(200 * time.Millisecond)
	watched.Start(t)
	h.pause(500 * time.Millisecond)

	leader := findLeader(t, members)
	t.Logf("killing leader %s", leader.Name)
	leader.Kill(t)
	h.pause(1500 * time.Millisecond) // an election takes ~1 s
	leader.Start(t)
	h.pause(300 * time.Millisecond)

	h.stopWritersAndAssertConverged(all)
	t.Logf("writes %d, informer stats %+v", h.writes.Load(), h.inf.Stats())
	assert.Positive(t, h.inf.Stats().Expired, "the compaction while cut off expired the watch")
}

// harness runs an informer over a Source on one etcd client, a handler that
// mirrors what it is told, and writers on another client.
type harness struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	inf    *informer.Informer[string, item]

	mirrorMu sync.Mutex
	mirror   map[string]item

	writes      atomic.Int64
	stopWriters context.CancelFunc
	writers     sync.WaitGroup
}

func startHarness(t *testing.T, informerEndpoints, writerEndpoints []string) *harness {
	t.Helper()
	ctx := ctxFor(t, 50*time.Second)
	h := &harness{t: t, ctx: ctx, prefix: uniquePrefix(t), mirror: make(map[string]item)}

	// Short timeouts so that a client notices a dead member quickly.
	src := must.Do(etcdstore.New[item](newClient(t, informerEndpoints), h.prefix))
	h.inf = must.Do(informer.New[string, item]("etcd-"+t.Name(), src,
		informer.WithWatchBackoff(backoff.Exponential{Base: 20 * time.Millisecond, Cap: 300 * time.Millisecond}),
		informer.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	_, err := h.inf.AddHandler(informer.HandlerFuncs[string, item]{
		AddFunc:    func(k string, v item, _ bool) { h.set(k, v, true) },
		UpdateFunc: func(k string, _, v item, _ bool) { h.set(k, v, true) },
		DeleteFunc: func(k string, _ item) { h.set(k, item{}, false) },
	})
	require.NoError(t, err)
	runCtx, stopInformer := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.inf.Run(runCtx) }()
	t.Cleanup(func() {
		stopInformer()
		assert.NoError(t, <-ran)
	})

	wctx, stopWriters := context.WithCancel(ctx)
	h.stopWriters = stopWriters
	t.Cleanup(h.stopWriters)
	wcli := newClient(t, writerEndpoints)
	c := &rawWriter{wcli, h.prefix}
	for w := range 4 {
		h.writers.Go(func() { h.write(wctx, c, w) })
	}
	require.NoError(t, h.inf.WaitForSync(ctx))
	return h
}

func (h *harness) set(k string, v item, present bool) {
	h.mirrorMu.Lock()
	defer h.mirrorMu.Unlock()
	if present {
		h.mirror[k] = v
	} else {
		delete(h.mirror, k)
	}
}

// write puts and deletes random keys until ctx is done, ignoring errors
// (etcd may be down; a write that failed may still have happened).
func (h *harness) write(ctx context.Context, c *rawWriter, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("k%02d", rng.IntN(60))
		opCtx, cancel := context.WithTimeout(ctx, time.Second)
		var err error
		if rng.IntN(4) == 0 {
			_, _, err = c.Delete(opCtx, key)
		} else {
			_, err = c.Put(opCtx, key, item{N: w*1_000_000 + i, S: key})
		}
		cancel()
		if err == nil {
			h.writes.Add(1)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// pause lets the writers and the informer run for d.
func (h *harness) pause(d time.Duration) {
	select {
	case <-time.After(d):
	case <-h.ctx.Done():
	}
}

// compact writes twice outside the prefix (so that the store's revision is
// at least two past anything the informer may have seen, even if the writers
// were stalled) and compacts at the resulting revision, through endpoints.
func (h *harness) compact(endpoints []string) {
	h.t.Helper()
	cli := newClient(h.t, endpoints)
	probe := h.prefix[:len(h.prefix)-1] + "-compact-probe"
	var rev int64
	// Retried: a member killed just before may have been the leader.
	for _, step := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := cli.Put(ctx, probe, "1"); return err },
		func(ctx context.Context) error {
			resp, err := cli.Put(ctx, probe, "2")
			if err == nil {
				rev = resp.Header.Revision
			}
			return err
		},
		func(ctx context.Context) error { _, err := cli.Compact(ctx, rev); return err },
	} {
		require.NoError(h.t, retry(h.ctx, step))
	}
	h.t.Logf("compacted at %d", rev)
}

// retry calls f with a 2 s timeout until it succeeds or ctx is done.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(opCtx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopWritersAndAssertConverged stops the writers, reads the prefix from etcd
// and waits until the informer's cache and the handler's mirror equal it.
func (h *harness) stopWritersAndAssertConverged(endpoints []string) {
	h.t.Helper()
	h.stopWriters()
	h.writers.Wait()
	require.Positive(h.t, h.writes.Load())

	cli := newClient(h.t, endpoints)
	var resp *clientv3.GetResponse
	require.NoError(h.t, retry(h.ctx, func(ctx context.Context) (err error) {
		resp, err = cli.Get(ctx, h.prefix, clientv3.WithPrefix())
		return err
	}))
	want := make(map[string]item, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v, err := informer.JSON[item]{}.Unmarshal(kv.Value)
		require.NoError(h.t, err)
		want[string(kv.Key[len(h.prefix):])] = v
	}

	cache := func() map[string]item {
		m := make(map[string]item)
		for _, e := range h.inf.List() {
			m[e.Key] = e.Value
		}
		return m
	}
	mirror := func() map[string]item {
		h.mirrorMu.Lock()
		defer h.mirrorMu.Unlock()
		m := make(map[string]item, len(h.mirror))
		for k, v := range h.mirror {
			m[k] = v
		}
		return m
	}
	converged := func() bool {
		return assert.ObjectsAreEqual(want, cache()) && assert.ObjectsAreEqual(want, mirror())
	}
	if !assert.Eventually(h.t, converged, 20*time.Second, 20*time.Millisecond) {
		assert.Equal(h.t, want, cache(), "informer cache")
		assert.Equal(h.t, want, mirror(), "handler's view")
	}
}

// findLeader returns the member that is the cluster's leader.
func findLeader(t *testing.T, members []testserver.EtcdMember) testserver.EtcdMember {
	t.Helper()
	for _, m := range members {
		cli := newClient(t, []string{m.Endpoint})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, m.Endpoint)
		cancel()
		require.NoError(t, err)
		if st.Leader == st.Header.MemberId {
			return m
		}
	}
	t.Fatal("no member is the leader")
	return testserver.EtcdMember{}
}
