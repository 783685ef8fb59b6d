//go:build linux

package shardchaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/internal/shardchaos"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/leader/shard"
)

const (
	buckets = 16
	keys    = 64
	lease   = 2 * time.Second
	renew   = 1500 * time.Millisecond
	retry   = 200 * time.Millisecond
	hold    = 50 * time.Millisecond
	tick    = 300 * time.Millisecond
	workers = 4 // the replica's
	// reconciledWithin bounds the time from a settled rebalance to the
	// start of every key's next reconcile. On an idle machine that is
	// about the next tick plus every key on one replica's workers,
	// tick + keys×hold/workers ≈ 1.1 s; the bound is generous because the
	// machine running the tests is shared (up to 16 s was seen under -race
	// with other jobs' tests running), and the times are logged.
	reconciledWithin = 30 * time.Second
)

type entry = shardchaos.Entry

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// build builds the replica once per test binary (with -race if this one
// is), into a directory TestMain removes.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "converge-shard-replica-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "replica")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/converge-go/converge/internal/shardchaos/replica")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// world is one run's records in a backend, and a client to read them.
type world struct {
	t *testing.T
	// args are the replicas' backend flags.
	args []string
	// locks lists the Sharder's records (named "chaos/…").
	locks shard.Backend
	// readLog returns the fenced log in commit order.
	readLog func() []entry
}

// etcdWorld creates a run under a fresh prefix: the fences at epoch 0.
func etcdWorld(t *testing.T) *world {
	endpoints := testserver.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	root := "/converge-test/shardchaos-" + candidates.UniqueSuffix()
	t.Cleanup(func() {
		_, _ = cli.Delete(context.Background(), root+"/", clientv3.WithPrefix())
		_ = cli.Close()
	})
	for b := range buckets {
		_, err := cli.Put(t.Context(), fmt.Sprintf("%s/fence/%d", root, b), fmt.Sprintf("%020d", 0))
		require.NoError(t, err)
	}
	return &world{
		t: t, args: []string{"-backend", "etcd", "-endpoints", strings.Join(endpoints, ","), "-root", root},
		locks: etcdlock.NewLocks(cli, root+"/locks/"),
		readLog: func() []entry {
			resp, err := cli.Get(t.Context(), root+"/log/", clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
			require.NoError(t, err)
			out := make([]entry, 0, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				var e entry
				require.NoError(t, json.Unmarshal(kv.Value, &e))
				out = append(out, e)
			}
			return out
		},
	}
}

// postgresWorld creates a run's tables under a fresh prefix: the locks',
// the fences at epoch 0, the log.
func postgresWorld(t *testing.T) *world {
	dsn := testserver.Postgres(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	root := "shardchaos_" + candidates.UniqueSuffix()
	fence, logTable := pgx.Identifier{root + "_fence"}.Sanitize(), pgx.Identifier{root + "_log"}.Sanitize()
	locks := pglock.NewLocks(pool, pglock.WithTable(root+"_leases"))
	require.NoError(t, locks.EnsureSchema(t.Context()))
	for _, stmt := range []string{
		`CREATE TABLE ` + fence + ` (bucket int PRIMARY KEY, epoch bigint NOT NULL)`,
		`INSERT INTO ` + fence + ` SELECT b, 0 FROM generate_series(0, ` + fmt.Sprint(buckets-1) + `) AS b`,
		`CREATE TABLE ` + logTable + ` (seq bigserial PRIMARY KEY, entry jsonb NOT NULL)`,
	} {
		_, err := pool.Exec(t.Context(), stmt)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, table := range []string{fence, logTable, pgx.Identifier{root + "_leases"}.Sanitize()} {
			_, _ = pool.Exec(context.Background(), `DROP TABLE `+table)
		}
		pool.Close()
	})
	return &world{
		t: t, args: []string{"-backend", "postgres", "-dsn", dsn, "-root", root},
		locks: locks,
		readLog: func() []entry {
			rows, err := pool.Query(t.Context(), `SELECT entry FROM `+logTable+` ORDER BY seq`)
			require.NoError(t, err)
			out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
				var e entry
				err := r.Scan(&e)
				return e, err
			})
			require.NoError(t, err)
			return out
		},
	}
}

// holders returns each bucket's holder in the lock records ("" for none
// or released).
func (w *world) holders() []string {
	out := make([]string, buckets)
	recs, err := w.locks.List(w.t.Context(), "chaos/buckets/")
	if err != nil {
		return out
	}
	for name, r := range recs {
		var b int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, "chaos/buckets/"), "%d", &b); err == nil && b < buckets {
			out[b] = r.HolderIdentity
		}
	}
	return out
}

// settle waits until the lock records hold every bucket as Assign over
// ids says, and returns the buckets whose holder changed from before.
func (w *world) settle(limit time.Duration, before []string, ids ...string) int {
	w.t.Helper()
	start := time.Now()
	want := shard.Assign(ids, buckets)
	for {
		got := w.holders()
		if slices.Equal(got, want) {
			moved := 0
			for b := range got {
				if got[b] != before[b] {
					moved++
				}
			}
			return moved
		}
		require.Less(w.t, time.Since(start), limit, "buckets did not settle on %v: %v", ids, got)
		time.Sleep(20 * time.Millisecond)
	}
}

// allReconciled waits until every key has an accepted reconcile that
// started after since (Mono), and returns how long after since the last
// of them started; it fails the test after limit.
func (w *world) allReconciled(since int64, limit time.Duration) time.Duration {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		first := map[string]int64{}
		for _, e := range w.readLog() {
			if e.Start >= since && (first[e.Key] == 0 || e.Start < first[e.Key]) {
				first[e.Key] = e.Start
			}
		}
		if len(first) == keys {
			var last int64
			for _, start := range first {
				last = max(last, start)
			}
			return time.Duration(last - since)
		}
		require.True(w.t, time.Now().Before(deadline), "only %d of %d keys reconciled within %v of a rebalance", len(first), keys, limit)
		time.Sleep(100 * time.Millisecond)
	}
}

func TestShardedReplicasOnEtcdShouldNeverReconcileAKeyTwiceAtOnce(t *testing.T) {
	runChaos(t, etcdWorld(t))
}

func TestShardedReplicasOnPostgresShouldNeverReconcileAKeyTwiceAtOnce(t *testing.T) {
	runChaos(t, postgresWorld(t))
}

// runChaos runs replicas in w through joins, a graceful leave, a SIGKILL
// and a SIGSTOP longer than a lease, and checks the fenced log.
func runChaos(t *testing.T, w *world) {
	bin := build(t)
	g := candidates.NewGroup(bin, "r", append(slices.Clone(w.args),
		"-buckets", fmt.Sprint(buckets), "-keys", fmt.Sprint(keys), "-lease", lease.String(), "-renew", renew.String(),
		"-retry", retry.String(), "-hold", hold.String(), "-tick", tick.String())...)
	defer func() {
		assert.NoError(t, g.KillAll(10*time.Second))
		for _, p := range g.Procs() {
			if s := p.Stderr(); s != "" {
				t.Logf("%s stderr:\n%s", p.ID(), s)
			}
		}
	}()
	start := func() *candidates.Proc {
		p, err := g.Start()
		require.NoError(t, err)
		return p
	}
	// leaving are the replicas told to stop: no longer members, though
	// they run until they have handed their buckets over.
	leaving := map[string]bool{}
	ids := func() []string {
		var out []string
		for _, p := range g.Running() {
			if !leaving[p.ID()] {
				out = append(out, p.ID())
			}
		}
		return out
	}
	// Generous limits for a loaded machine; the times are logged.
	const limit = 30 * time.Second
	type measured struct {
		what       string
		took       time.Duration
		moved, per int
		reconciled time.Duration // from settled to every key's next reconcile
	}
	var report []measured
	// step measures from just before act to the settled records.
	step := func(what string, act func()) {
		before := w.holders()
		began := time.Now()
		act()
		moved := w.settle(limit, before, ids()...)
		took := time.Since(began)
		reconciled := w.allReconciled(candidates.Mono(), reconciledWithin)
		report = append(report, measured{what, took, moved, buckets / max(1, len(ids())), reconciled})
	}

	// 4 to 6 replicas (3 live while one is stopped).
	r1, r2, r3, r4 := start(), start(), start(), start()
	step("start 4", func() {})
	step("join", func() { _ = start() })
	step("join", func() { _ = start() })
	step("graceful leave", func() {
		leaving[r2.ID()] = true
		_, err := r2.Signal(syscall.SIGTERM)
		require.NoError(t, err)
	})
	code, err := r2.Wait(limit)
	require.NoError(t, err)
	assert.Zero(t, code, "a graceful leave exits cleanly")
	step("SIGKILL", func() {
		_, err := r3.Signal(syscall.SIGKILL)
		require.NoError(t, err)
		_, _ = r3.Wait(limit)
	})
	step("SIGSTOP (3 leases)", func() {
		_, err := r4.Signal(syscall.SIGSTOP)
		require.NoError(t, err)
	})
	time.Sleep(lease) // the others hold everything for a while
	var resumed int64
	step("SIGCONT", func() {
		resumed = candidates.Mono()
		_, err := r4.Signal(syscall.SIGCONT)
		require.NoError(t, err)
	})
	step("join", func() { _ = start() })
	_ = r1

	for _, m := range report {
		t.Logf("%-20s rebalanced in %v, %d buckets moved (B/n after = %d), every key reconciled %v later", m.what,
			m.took.Round(time.Millisecond), m.moved, m.per, m.reconciled.Round(time.Millisecond))
	}
	log := w.readLog()
	require.NotEmpty(t, log)
	checkNoOverlap(t, log)
	checkEpochs(t, log)
	refused, startedStale := 0, 0
	for _, ev := range g.Events() {
		if ev.Ev == "claimRefused" || ev.Ev == "writeRefused" {
			refused++
		}
		// A reconcile that the resumed replica began after SIGCONT on an
		// epoch superseded during its pause: its lease had lapsed by its
		// own clock, so it must not have started at all.
		if ev.Ev == "claimRefused" && ev.ID == r4.ID() && ev.Start > resumed {
			startedStale++
		}
	}
	t.Logf("%d entries accepted, %d claims or writes refused by the fence", len(log), refused)
	assert.Zero(t, startedStale, "reconciles begun after SIGCONT on an epoch that lapsed during the pause")
}

// checkNoOverlap fails if two accepted reconciles of one key overlap.
func checkNoOverlap(t *testing.T, log []entry) {
	t.Helper()
	byKey := map[string][]entry{}
	for _, e := range log {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	for k, es := range byKey {
		slices.SortFunc(es, func(a, b entry) int { return int(a.Start - b.Start) })
		for i := 1; i < len(es); i++ {
			if es[i].Start < es[i-1].End {
				t.Errorf("key %s: %s (bucket %d epoch %d) started %v before %s (epoch %d) ended", k,
					es[i].Replica, es[i].Bucket, es[i].Epoch, time.Duration(es[i-1].End-es[i].Start), es[i-1].Replica, es[i-1].Epoch)
			}
		}
	}
}

// checkEpochs fails if a bucket's accepted entries, in commit order, go
// back to an older epoch, or one epoch belongs to two replicas.
func checkEpochs(t *testing.T, log []entry) {
	t.Helper()
	lastEpoch := map[int]uint64{}
	owner := map[[2]uint64]string{}
	for _, e := range log {
		if e.Epoch < lastEpoch[e.Bucket] {
			t.Errorf("bucket %d: an entry of epoch %d by %s accepted after epoch %d", e.Bucket, e.Epoch, e.Replica, lastEpoch[e.Bucket])
		}
		lastEpoch[e.Bucket] = max(lastEpoch[e.Bucket], e.Epoch)
		k := [2]uint64{uint64(e.Bucket), e.Epoch}
		if o, ok := owner[k]; ok && o != e.Replica {
			t.Errorf("bucket %d epoch %d held by %s and %s", e.Bucket, e.Epoch, o, e.Replica)
		}
		owner[k] = e.Replica
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}
