package main

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/pglock"
)

// etcdEndpoints returns the integration etcd, or skips the test.
func etcdEndpoints(t *testing.T) string { return strings.Join(testserver.Etcd(t), ",") }

// freshEtcd returns the test etcd's endpoints with the control plane's
// keys (fixed: /cluster/...) deleted, for a run that starts from nothing.
func freshEtcd(t *testing.T) string {
	ep := etcdEndpoints(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(ep, ","), Logger: zap.NewNop()})
	require.NoError(t, err)
	_, err = cli.Delete(t.Context(), "/cluster/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.NoError(t, cli.Close())
	return ep
}

// leaderContext runs an elector on lock until it leads, and returns the
// context of its term (values only: it outlives the term) and a function
// that ends the term.
func leaderContext(t *testing.T, lock leader.Lock, id string) (context.Context, func()) {
	got := make(chan context.Context, 1)
	e, err := leader.New(lock, leader.Config{Identity: id, ReleaseOnCancel: true, LeaseDuration: 2 * time.Second,
		RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		OnStartedLeading: func(ctx context.Context) { got <- ctx; <-ctx.Done() }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	select {
	case lctx := <-got:
		return context.WithoutCancel(lctx), func() { cancel(); <-done }
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("never led")
	}
	return nil, nil
}

// testFencing checks that nodes, a termFenced store of lock's backend,
// refuses a deposed leader's write and takes the others'.
func testFencing(t *testing.T, lock leader.Lock, nodes informer.Store[string, api.Node], fenced error) {
	oldCtx, stopOld := leaderContext(t, lock, "a")
	_, err := nodes.Create(oldCtx, "n1", api.Node{Metadata: api.Metadata{Name: "n1"}})
	require.NoError(t, err, "the leader writes")
	stopOld()
	newCtx, stopNew := leaderContext(t, lock, "b")
	defer stopNew()
	oldTerm, _ := leader.TermFromContext(oldCtx)
	newTerm, _ := leader.TermFromContext(newCtx)
	require.Greater(t, newTerm, oldTerm)
	_, err = nodes.Create(newCtx, "n2", api.Node{Metadata: api.Metadata{Name: "n2"}})
	require.NoError(t, err, "the new leader writes, raising the fence")
	_, err = nodes.Create(oldCtx, "n3", api.Node{Metadata: api.Metadata{Name: "n3"}})
	require.ErrorIs(t, err, fenced, "the deposed leader's late write")
	_, _, ok, err := nodes.Get(t.Context(), "n3")
	require.NoError(t, err)
	assert.False(t, ok, "nothing written")
	_, err = nodes.Create(t.Context(), "n4", api.Node{Metadata: api.Metadata{Name: "n4"}})
	assert.NoError(t, err, "a write outside a leader's context (the API's) is not fenced")
}

func TestLeaderWritesShouldBeFencedByTheTermOnEtcd(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(t), Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	prefix := "/test-fence-" + time.Now().Format("150405.000000") + "/"
	testFencing(t, etcdlock.NewLock(cli, prefix+"lock"),
		etcdFenced(must.Do(etcdstore.New[api.Node](cli, prefix+"nodes/")), prefix+"fence"), etcdstore.ErrFenced)
}

func TestLeaderWritesShouldBeFencedByTheTermOnPostgres(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), testserver.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()
	schema := "cluster_fence_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	require.NoError(t, pgstore.Setup(t.Context(), pool, schema))
	db := must.Do(pgstore.NewDB(pool, pgstore.WithSchema(schema)))
	defer db.Close()
	name := "fence-" + schema
	lock := pglock.NewLock(pool, name)
	require.NoError(t, lock.EnsureSchema(t.Context()))
	testFencing(t, lock, pgFenced(must.Do(pgstore.New[api.Node](db, "nodes")), name), pgstore.ErrFenced)
}

func TestTwoUpProcessesShouldRunActiveStandby(t *testing.T) {
	ep := etcdEndpoints(t)
	lock := "test-" + time.Now().Format("150405.000000")
	start := func(id string) (lines chan string, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- up(ctx, upConfig{store: "etcd://" + ep, timings: "fast", listen: "127.0.0.1:0", managerAddr: "off",
				logLevel: "none", lock: lock, identity: id}, pw, io.Discard)
			_ = pw.Close()
		}()
		lines = make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		return lines, func() { cancel(); require.NoError(t, <-done) }
	}
	wait := func(lines chan string, want string) {
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "ended before %q", want)
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q", want)
			}
		}
	}
	a, stopA := start("a")
	wait(a, "a leads the control plane")
	b, stopB := start("b")
	defer stopB()
	wait(b, "active/standby on lock "+lock)
	select {
	case l := <-b:
		t.Fatalf("the standby said %q while a leads", l)
	case <-time.After(500 * time.Millisecond):
	}
	stopA()
	wait(b, "b leads the control plane")
}
