package reconcile_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/reconcile"
)

// On etcd the head is the cluster's revision: a write under another prefix
// moves it, and an informer reaches it with etcd's next progress
// notification (every second on the test server; 10 minutes by default).
// The barrier waits for it: the first reconcile reads a cache at or past
// the head the Run read when it started.
func TestOnEtcdTheFirstReconcileReadsACacheAtTheClustersHeadRevision(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer func() { _ = cli.Close() }()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "/converge-test/head-barrier-" + hex.EncodeToString(b) + "/"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := must.Do(etcdstore.New[int](cli, prefix))
	_, err = store.Create(ctx, "k", 1)
	require.NoError(t, err)

	inf := must.Do(informer.New[string, int]("things", store, informer.WithLogger(quietLogger)))
	firstAt := make(chan informer.Revision, 1)
	rec := reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		select {
		case firstAt <- inf.LastRevision():
		default:
		}
		return reconcile.Result{}, nil
	})
	c, err := reconcile.New("c", rec, reconcile.For(inf), reconcile.WithHeadBarrier(), reconcile.WithShutdownGrace(0), quiet)
	require.NoError(t, err)
	infCtx, stopInf := context.WithCancel(ctx)
	infDone := make(chan error, 1)
	go func() { infDone <- inf.Run(infCtx) }()
	defer func() {
		stopInf()
		require.NoError(t, <-infDone)
	}()
	require.NoError(t, inf.WaitForSync(ctx))

	other, err := cli.Put(ctx, strings.TrimSuffix(prefix, "/")+"-elsewhere/x", "1") // another prefix: the cluster's revision moves
	require.NoError(t, err)
	head := informer.Revision(other.Header.Revision)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	select {
	case rev := <-firstAt:
		assert.GreaterOrEqual(t, rev, head, "the first reconcile waited for the informer to reach the head")
	case <-ctx.Done():
		t.Fatal("no reconcile")
	}
}
