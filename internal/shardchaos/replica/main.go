// Command replica is one process of the sharding chaos test (package
// internal/shardchaos): a reconcile.Manager running a Sharder over etcd
// locks and a sharded controller that reconciles a fixed set of keys.
//
// Every -tick every key is queued (a FromFunc source), and the controller
// admits only the keys of the buckets this replica holds. Each reconcile
// first claims its bucket's fence for its epoch (an etcd transaction that
// raises the fence key -root/fence/<bucket> to the epoch unless it holds a
// larger one), holds for -hold, and then appends an entry (key, replica,
// bucket, epoch, start, end) to the log under -root/log/ in a transaction
// that also requires the fence to be no larger than its epoch. A refused
// claim or append is reported as an event and not retried.
//
// It prints one JSON object per line (candidates.Event's format): "ready",
// then "claimRefused" and "writeRefused" events, and "exit". SIGTERM or
// SIGINT stops it gracefully: the Sharder gives every bucket up (drains,
// releases) before it exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

// Entry is one record of the fenced log.
type Entry struct {
	Key     string `json:"key"`
	Replica string `json:"replica"`
	Bucket  int    `json:"bucket"`
	Epoch   uint64 `json:"epoch"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
}

func main() {
	var (
		endpoints = flag.String("endpoints", "", "etcd endpoints, comma-separated")
		root      = flag.String("root", "", "key prefix of the run")
		id        = flag.String("id", "", "identity")
		buckets   = flag.Int("buckets", 16, "buckets")
		keys      = flag.Int("keys", 64, "keys k000… to reconcile")
		lease     = flag.Duration("lease", 2*time.Second, "LeaseDuration")
		renew     = flag.Duration("renew", 1500*time.Millisecond, "RenewDeadline")
		retry     = flag.Duration("retry", 200*time.Millisecond, "RetryPeriod")
		hold      = flag.Duration("hold", 20*time.Millisecond, "how long a reconcile takes")
		tick      = flag.Duration("tick", 300*time.Millisecond, "how often every key is queued")
	)
	flag.Parse()
	if err := run(*endpoints, *root, *id, *buckets, *keys, *lease, *renew, *retry, *hold, *tick); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

var outMu sync.Mutex

// emit prints one event line.
func emit(ev map[string]any) {
	ev["t"] = mono()
	b, _ := json.Marshal(ev)
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func run(endpoints, root, id string, buckets, nkeys int, lease, renew, retry, hold, tick time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	s, err := shard.New(etcdlock.NewLocks(cli, root+"/locks/"), shard.Config{
		Name: "chaos", Identity: id, Buckets: buckets, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
	})
	if err != nil {
		return err
	}
	all := make([]string, nkeys)
	for i := range all {
		all[i] = fmt.Sprintf("k%03d", i)
	}
	f := &fenced{cli: cli, root: root, id: id, hold: hold}
	c, err := reconcile.New("chaos", reconcile.Func[string](f.reconcile),
		reconcile.FromFunc("ticker", func(ctx context.Context, enqueue func(string)) error {
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				for _, k := range all {
					enqueue(k)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		}),
		reconcile.WithShards[string](s, nil), reconcile.WithWorkers(4),
		reconcile.WithShutdownGrace(time.Second), reconcile.WithLogger(logger))
	if err != nil {
		return err
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Shards: s, Logger: logger})
	if err != nil {
		return err
	}
	if err := m.AddController(c); err != nil {
		return err
	}
	emit(map[string]any{"ev": "ready", "id": id})
	err = m.Run(ctx)
	emit(map[string]any{"ev": "exit", "id": id})
	return err
}

// fenced is the reconciler: claim, hold, append, all fenced on the
// bucket's epoch.
type fenced struct {
	cli  *clientv3.Client
	root string
	id   string
	hold time.Duration
	mu   sync.Mutex
	seq  int
}

func epochString(e uint64) string { return fmt.Sprintf("%020d", e) }

func (f *fenced) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	b, ok := shard.FromContext(ctx)
	if !ok {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("no bucket in the context of %s", key))
	}
	fence := fmt.Sprintf("%s/fence/%d", f.root, b.ID)
	e := uint64(b.Epoch)
	// Claim: raise the fence to e unless a later epoch holds it.
	resp, err := f.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(fence), "<", epochString(e+1))).
		Then(clientv3.OpPut(fence, epochString(e))).
		Commit()
	if err != nil {
		return reconcile.Result{}, err
	}
	if !resp.Succeeded {
		emit(map[string]any{"ev": "claimRefused", "id": f.id, "term": e, "err": fmt.Sprintf("%s bucket %d", key, b.ID)})
		return reconcile.Result{}, nil
	}
	// The interval starts after the claim: a stale write that lands
	// before the claim (and is accepted) then ends before it starts.
	start := mono()
	select {
	case <-time.After(f.hold):
	case <-ctx.Done():
		return reconcile.Result{}, context.Cause(ctx)
	}
	end := mono()
	entry, _ := json.Marshal(Entry{Key: key, Replica: f.id, Bucket: b.ID, Epoch: e, Start: start, End: end})
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("%s/log/%s-%08d", f.root, f.id, f.seq)
	f.mu.Unlock()
	// A detached context: the append of a reconcile that was cancelled
	// after its hold is the late write the fence must refuse.
	resp, err = f.cli.Txn(context.WithoutCancel(ctx)).
		If(clientv3.Compare(clientv3.Value(fence), "<", epochString(e+1))).
		Then(clientv3.OpPut(name, string(entry))).
		Commit()
	if err != nil {
		return reconcile.Result{}, err
	}
	if !resp.Succeeded {
		emit(map[string]any{"ev": "writeRefused", "id": f.id, "term": e, "err": fmt.Sprintf("%s bucket %d", key, b.ID)})
	}
	return reconcile.Result{}, nil
}
