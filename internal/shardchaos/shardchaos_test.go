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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
)

const (
	buckets = 16
	keys    = 64
	lease   = 2 * time.Second
	renew   = 1500 * time.Millisecond
	retry   = 200 * time.Millisecond
	hold    = 100 * time.Millisecond
	tick    = 300 * time.Millisecond
)

// entry is the replica's log record (see its Entry).
type entry struct {
	Key     string `json:"key"`
	Replica string `json:"replica"`
	Bucket  int    `json:"bucket"`
	Epoch   uint64 `json:"epoch"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
}

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replica")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/converge-go/converge/internal/shardchaos/replica")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// world is one run's etcd prefix and the client to read it with.
type world struct {
	t     *testing.T
	cli   *clientv3.Client
	root  string
	locks *etcdlock.Locks
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
// ids says, and returns how long it took and the buckets whose holder
// changed from before.
func (w *world) settle(limit time.Duration, before []string, ids ...string) (time.Duration, int) {
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
			return time.Since(start), moved
		}
		require.Less(w.t, time.Since(start), limit, "buckets did not settle on %v: %v", ids, got)
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *world) log() []entry {
	resp, err := w.cli.Get(w.t.Context(), w.root+"/log/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	require.NoError(w.t, err)
	out := make([]entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var e entry
		require.NoError(w.t, json.Unmarshal(kv.Value, &e))
		out = append(out, e)
	}
	return out
}

func TestShardedReplicasShouldNeverReconcileAKeyTwiceAtOnceThroughJoinsLeavesKillsAndPauses(t *testing.T) {
	endpoints := testserver.Etcd(t)
	bin := build(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer func() { _ = cli.Close() }()
	root := "/converge-test/shardchaos-" + candidates.UniqueSuffix()
	w := &world{t: t, cli: cli, root: root, locks: etcdlock.NewLocks(cli, root+"/locks/")}
	defer func() { _, _ = cli.Delete(context.Background(), root+"/", clientv3.WithPrefix()) }()
	for b := range buckets {
		_, err := cli.Put(t.Context(), fmt.Sprintf("%s/fence/%d", root, b), fmt.Sprintf("%020d", 0))
		require.NoError(t, err)
	}

	g := candidates.NewGroup(bin, "r", "-endpoints", strings.Join(endpoints, ","), "-root", root,
		"-buckets", fmt.Sprint(buckets), "-keys", fmt.Sprint(keys), "-lease", lease.String(), "-renew", renew.String(),
		"-retry", retry.String(), "-hold", hold.String(), "-tick", tick.String())
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
	ids := func() []string {
		var out []string
		for _, p := range g.Running() {
			out = append(out, p.ID())
		}
		return out
	}
	// Generous limits for a loaded machine; the times are logged.
	const limit = 30 * time.Second
	type measured struct {
		what       string
		took       time.Duration
		moved, per int
	}
	var report []measured
	step := func(what string, act func()) {
		before := w.holders()
		act()
		took, moved := w.settle(limit, before, ids()...)
		report = append(report, measured{what, took, moved, buckets / max(1, len(ids()))})
	}

	r1, r2, r3 := start(), start(), start()
	step("start 3", func() {})
	var r4 *candidates.Proc
	step("join", func() { r4 = start() })
	step("graceful leave", func() {
		_, err := r2.Signal(syscall.SIGTERM)
		require.NoError(t, err)
		_, err = r2.Wait(limit)
		require.NoError(t, err)
	})
	step("SIGKILL", func() {
		_, err := r3.Signal(syscall.SIGKILL)
		require.NoError(t, err)
		_, _ = r3.Wait(limit)
	})
	step("SIGSTOP (3 leases)", func() {
		_, err := r4.Signal(syscall.SIGSTOP)
		require.NoError(t, err)
	})
	time.Sleep(lease) // r1 and r5 hold everything for a while
	step("SIGCONT", func() {
		_, err := r4.Signal(syscall.SIGCONT)
		require.NoError(t, err)
	})
	step("join", func() { _ = start() })
	settled := candidates.Mono()
	time.Sleep(3 * tick)
	_ = r1

	for _, m := range report {
		t.Logf("%-20s rebalanced in %v, %d buckets moved (B/n after = %d)", m.what, m.took.Round(time.Millisecond), m.moved, m.per)
	}
	log := w.log()
	require.NotEmpty(t, log)
	checkNoOverlap(t, log)
	checkEpochs(t, log)
	// Liveness: every key reconciled after the last change settled.
	last := map[string]int64{}
	for _, e := range log {
		last[e.Key] = max(last[e.Key], e.Start)
	}
	for i := range keys {
		k := fmt.Sprintf("k%03d", i)
		assert.Greater(t, last[k], settled, "%s reconciled within %v of the last rebalance", k, 3*tick)
	}
	refused := 0
	for _, ev := range g.Events() {
		if ev.Ev == "claimRefused" || ev.Ev == "writeRefused" {
			refused++
		}
	}
	t.Logf("%d entries accepted, %d claims or writes refused by the fence", len(log), refused)
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

func TestMain(m *testing.M) { os.Exit(m.Run()) }
