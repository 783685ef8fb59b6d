//go:build linux

// Command replica is one process of the sharding chaos test (package
// internal/shardchaos): a reconcile.Manager running a Sharder over etcd
// locks and a sharded controller that reconciles a fixed set of keys.
//
// Every -tick every key is queued (a FromFunc source), and the controller
// admits only the keys of the buckets this replica holds. Each reconcile
// first claims its bucket's fence for its epoch (over etcd, the
// transaction of etcdstore.BucketFence, which raises the fence key
// -root/fence/<bucket> to the epoch unless it holds a larger one), holds
// for -hold, and then appends an entry (key, replica, bucket, epoch,
// start, end) to the log under -root/log/ in a transaction that also
// requires the fence to be no larger than its epoch. A refused
// claim or append is reported as an event and not retried.
//
// It prints one JSON object per line (candidates.Event's format): "ready",
// then "claimRefused" (with the reconcile's start) and "writeRefused"
// events, and "exit". SIGTERM or
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

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/internal/shardchaos"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

func main() {
	var (
		backend   = flag.String("backend", "etcd", "etcd or postgres")
		endpoints = flag.String("endpoints", "", "etcd endpoints, comma-separated")
		dsn       = flag.String("dsn", "", "PostgreSQL connection string")
		root      = flag.String("root", "", "the run's etcd key prefix, or PostgreSQL table prefix (an identifier)")
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var (
		st  store
		err error
	)
	switch *backend {
	case "etcd":
		st, err = newEtcdStore(strings.Split(*endpoints, ","), *root)
	case "postgres":
		st, err = newPostgresStore(ctx, *dsn, *root)
	default:
		err = fmt.Errorf("unknown -backend %q", *backend)
	}
	if err == nil {
		defer st.close()
		err = run(ctx, st, *id, *buckets, *keys, *lease, *renew, *retry, *hold, *tick)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

var outMu sync.Mutex

// emit prints one event line.
func emit(ev map[string]any) {
	ev["t"] = candidates.Mono()
	b, _ := json.Marshal(ev)
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// store is the backend of a run: the Sharder's locks (named under
// "chaos/"), and the fenced claim and append.
type store interface {
	locks() shard.Backend
	// claim raises the bucket's fence to e, unless it holds a larger
	// epoch: then it reports false.
	claim(ctx context.Context, b shard.Bucket) (bool, error)
	// append adds entry to the log if the bucket's fence is at most e,
	// else reports false.
	append(ctx context.Context, b shard.Bucket, entry []byte) (bool, error)
	close()
}

func run(ctx context.Context, st store, id string, buckets, nkeys int, lease, renew, retry, hold, tick time.Duration) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	s, err := shard.New(st.locks(), shard.Config{
		Name: "chaos", Identity: id, Buckets: buckets, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
	})
	if err != nil {
		return err
	}
	all := make([]string, nkeys)
	for i := range all {
		all[i] = fmt.Sprintf("k%03d", i)
	}
	f := &fenced{st: st, id: id, hold: hold}
	c, err := reconcile.New("chaos", reconcile.Func(f.reconcile),
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
		reconcile.WithShards(s), reconcile.WithWorkers(4),
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
	st   store
	id   string
	hold time.Duration
}

func (f *fenced) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	began := candidates.Mono()
	b, ok := shard.FromContext(ctx)
	if !ok {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("no bucket in the context of %s", key))
	}
	ok, err := f.st.claim(ctx, b)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		emit(map[string]any{"ev": "claimRefused", "id": f.id, "term": b.Epoch, "start": began, "err": fmt.Sprintf("%s bucket %d", key, b.ID)})
		return reconcile.Result{}, nil
	}
	// The interval starts after the claim: a stale write that lands
	// before the claim (and is accepted) then ends before it starts.
	start := candidates.Mono()
	select {
	case <-time.After(f.hold):
	case <-ctx.Done():
		return reconcile.Result{}, context.Cause(ctx)
	}
	entry, _ := json.Marshal(shardchaos.Entry{Key: key, Replica: f.id, Bucket: b.ID, Epoch: uint64(b.Epoch), Start: start, End: candidates.Mono()})
	// A detached context: the append of a reconcile whose lease ended
	// after its hold is the late write the fence must refuse.
	ok, err = f.st.append(context.WithoutCancel(ctx), b, entry)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		emit(map[string]any{"ev": "writeRefused", "id": f.id, "term": b.Epoch, "err": fmt.Sprintf("%s bucket %d", key, b.ID)})
	}
	return reconcile.Result{}, nil
}
