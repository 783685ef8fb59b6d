package failover_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/reconcile"
)

// The replica's settings come from the environment of its process.
const (
	replicaEnv   = "CONVERGE_FAILOVER_REPLICA" // its identity; set only in replicas
	endpointsEnv = "CONVERGE_FAILOVER_ENDPOINTS"
	prefixEnv    = "CONVERGE_FAILOVER_PREFIX"
)

// Leader timings: short, so the test is quick, and safe on one machine
// (the margin LeaseDuration-RenewDeadline covers scheduling delays).
const (
	leaseDuration = 1500 * time.Millisecond
	renewDeadline = 1000 * time.Millisecond
	retryPeriod   = 100 * time.Millisecond
)

// item is the desired state; done is what the controller writes for it.
type item struct{ Value int }

type done struct {
	By    string
	Term  uint64
	Value int
}

func TestMain(m *testing.M) {
	if id := os.Getenv(replicaEnv); id != "" {
		if err := runReplica(id); err != nil {
			fmt.Fprintln(os.Stderr, "replica:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runReplica is one replica's main: a Manager with an etcd lock, an informer
// over prefix/items/ and a controller writing prefix/done/<key>.
func runReplica(id string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv(endpointsEnv), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	prefix := os.Getenv(prefixEnv)
	items := must.Do(informer.New("items", must.Do(etcdstore.New[item](cli, prefix+"/items/"))))
	// Results are plain etcd puts of JSON, as before: blind writes, which
	// an etcdstore.Store does not make (it only compares and swaps).
	results := prefix + "/done/"
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := reconcile.New("items", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		it, ok := items.Get(key)
		if !ok {
			_, err := cli.Delete(ctx, results+key)
			return reconcile.Result{}, err
		}
		term, _ := leader.TermFromContext(ctx)
		data, err := json.Marshal(done{By: id, Term: uint64(term), Value: it.Value})
		if err != nil {
			return reconcile.Result{}, err
		}
		_, err = cli.Put(ctx, results+key, string(data))
		return reconcile.Result{}, err
	}), reconcile.For(items), reconcile.WithWorkers(4), reconcile.WithLogger(logger))
	if err != nil {
		return err
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{
		Addr: "off",
		Lock: etcdlock.NewLock(cli, prefix+"/lock"),
		Leader: leader.Config{
			Identity: id, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true,
			OnNewLeader:     func(who string) { fmt.Printf("leader %s\n", who) },
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	if err := m.AddInformer(items); err != nil {
		return err
	}
	if err := m.AddController(c); err != nil {
		return err
	}
	fmt.Println("started")
	return m.Run(ctx)
}

// replicaProc is a running replica process.
type replicaProc struct {
	id      string
	cmd     *exec.Cmd
	leaders chan string // identities from its "leader X" lines
}

func startReplica(t *testing.T, id string, endpoints []string, prefix string) *replicaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replicaEnv+"="+id, endpointsEnv+"="+strings.Join(endpoints, ","), prefixEnv+"="+prefix)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &replicaProc{id: id, cmd: cmd, leaders: make(chan string, 64)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if who, ok := strings.CutPrefix(sc.Text(), "leader "); ok {
				select {
				case p.leaders <- who:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p
}

// doneBy reads every done record: key -> record.
func doneBy(t *testing.T, cli *clientv3.Client, prefix string) map[string]done {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/done/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string]done{}
	for _, kv := range resp.Kvs {
		var d done
		require.NoError(t, json.Unmarshal(kv.Value, &d))
		out[strings.TrimPrefix(string(kv.Key), prefix+"/done/")] = d
	}
	return out
}

// allDoneBy reports whether every one of n items is done by id.
func allDoneBy(t *testing.T, cli *clientv3.Client, prefix string, n int, id string) bool {
	recs := doneBy(t, cli, prefix)
	if len(recs) != n {
		return false
	}
	for _, d := range recs {
		if d.By != id {
			return false
		}
	}
	return true
}

func TestWhenTheLeadersProcessIsKilledAnotherReplicaTakesOverAndReconcilesEveryKey(t *testing.T) {
	endpoints := testserver.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "/converge-test/failover-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
	})

	const n = 30
	ctx := context.Background()
	for i := range n {
		_, err := cli.Put(ctx, fmt.Sprintf("%s/items/k%02d", prefix, i), fmt.Sprintf(`{"Value":%d}`, i))
		require.NoError(t, err)
	}

	a := startReplica(t, "a", endpoints, prefix)
	require.Eventually(t, func() bool { return allDoneBy(t, cli, prefix, n, "a") }, 20*time.Second, 20*time.Millisecond,
		"the first replica leads and reconciles every key")
	bProc := startReplica(t, "b", endpoints, prefix)
	select {
	case who := <-bProc.leaders:
		require.Equal(t, "a", who, "the second replica sees the first as leader")
	case <-time.After(10 * time.Second):
		t.Fatal("the second replica never read the lock")
	}
	termA := doneBy(t, cli, prefix)["k00"].Term

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	require.Eventually(t, func() bool { return allDoneBy(t, cli, prefix, n, "b") }, 20*time.Second, 10*time.Millisecond,
		"the survivor takes over and reconciles every key")
	took := time.Since(killed)
	t.Logf("every key reconciled by the new leader %v after SIGKILL of the old (lease %v)", took, leaseDuration)
	assert.Less(t, took, leaseDuration+2*retryPeriod+time.Second, "take-over within lease + retry + margin")
	for key, d := range doneBy(t, cli, prefix) {
		assert.Greater(t, d.Term, termA, "%s written in a later term", key)
	}

	// And it keeps reconciling changes.
	_, err = cli.Put(ctx, prefix+"/items/k00", `{"Value":100}`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return doneBy(t, cli, prefix)["k00"].Value == 100 }, 10*time.Second, 10*time.Millisecond)
}
