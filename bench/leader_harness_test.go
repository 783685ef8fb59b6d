//go:build linux

package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
	leaderpg "github.com/converge-go/converge/leader/postgres"
)

// This file runs leader/chaos/candidate processes for the fail-over
// benchmarks: a trimmed copy of the harness of leader/chaos's tests (which
// also check the log), since a test package cannot be imported. The
// candidate's output format is documented in its package.

// candEvent is a line of a candidate's output.
type candEvent struct {
	Ev   string      `json:"ev"`
	ID   string      `json:"id"`
	T    int64       `json:"t"`
	Term leader.Term `json:"term"`
	OK   bool        `json:"ok"`
	Done int64       `json:"done"`
}

// monoNow is CLOCK_MONOTONIC in nanoseconds, the clock of the candidates'
// event times.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// candidateBin builds the candidate into a directory of the benchmark that
// first asks for it, once.
type candidateBin struct {
	parent *testing.B
	once   sync.Once
	path   string
	err    error
}

func (c *candidateBin) get(b *testing.B) string {
	b.Helper()
	c.once.Do(func() {
		c.path = filepath.Join(c.parent.TempDir(), "candidate")
		out, err := exec.Command("go", "build", "-o", c.path, "github.com/converge-go/converge/leader/chaos/candidate").CombinedOutput()
		if err != nil {
			c.err = fmt.Errorf("go build candidate: %v\n%s", err, out)
		}
	})
	if c.err != nil {
		b.Fatal(c.err)
	}
	return c.path
}

type candProc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
}

// candidates runs candidate processes and collects their events; a
// cleanup kills those still running.
type candidates struct {
	b    *testing.B
	bin  string
	args []string

	mu      sync.Mutex
	events  []candEvent
	changed chan struct{}
	procs   []*candProc
	serial  int
}

func newCandidates(b *testing.B, bin string, args ...string) *candidates {
	c := &candidates{b: b, bin: bin, args: args, changed: make(chan struct{})}
	b.Cleanup(func() {
		c.mu.Lock()
		procs := slices.Clone(c.procs)
		c.mu.Unlock()
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
		for _, p := range procs {
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				b.Errorf("candidate %s still running 30s after SIGKILL", p.id)
			}
		}
	})
	return c
}

// start starts a candidate and waits until it is ready.
func (c *candidates) start() *candProc {
	c.b.Helper()
	c.mu.Lock()
	c.serial++
	p := &candProc{id: fmt.Sprintf("b%02d", c.serial), done: make(chan struct{})}
	c.mu.Unlock()
	p.cmd = exec.Command(c.bin, append(slices.Clone(c.args), "-id", p.id)...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		c.b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		c.b.Fatal(err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev candEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.mu.Lock()
				c.events = append(c.events, ev)
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
			}
		}
		_ = p.cmd.Wait()
	}()
	c.await(30*time.Second, "candidate ready", func(ev candEvent) bool { return ev.Ev == "ready" && ev.ID == p.id })
	return p
}

// await returns the first event so far or within timeout that matches.
func (c *candidates) await(timeout time.Duration, what string, match func(candEvent) bool) candEvent {
	c.b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		c.mu.Lock()
		evs, changed := c.events, c.changed
		c.mu.Unlock()
		for _, ev := range evs[seen:] {
			if match(ev) {
				return ev
			}
		}
		seen = len(evs)
		select {
		case <-changed:
		case <-deadline.C:
			c.b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func (c *candidates) proc(id string) *candProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// leaderAfter waits for the first accepted write of a term above after
// and returns its event.
func (c *candidates) leaderAfter(after leader.Term, timeout time.Duration) candEvent {
	c.b.Helper()
	return c.await(timeout, fmt.Sprintf("an accepted write of a term after %d", after), func(ev candEvent) bool {
		return ev.Ev == "write" && ev.OK && ev.Term > after
	})
}

func uniqueName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// candidateStore returns the candidates' flags for a fresh lock, fence and
// log in backend ("etcd" or "postgres"), or skips b if the server is not
// configured (see package internal/testserver), and removes them when b
// ends.
func candidateStore(b *testing.B, backend string) []string {
	b.Helper()
	env := map[string]string{"etcd": testserver.EtcdEndpointsEnv, "postgres": testserver.PostgresDSNEnv}[backend]
	if os.Getenv(env) == "" && !testserver.Integration() {
		b.Skipf("SKIPPED: %s is not set, so there is no %s server to measure. Start the servers and run again: "+
			`scripts/servers.sh start; eval "$(scripts/servers.sh env)"; go test -run '^$' -bench LeaderFailover ./bench; scripts/servers.sh stop`,
			env, backend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "bench_" + uniqueName()
	switch backend {
	case "etcd":
		endpoints := testserver.Etcd(b)
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		prefix := "/converge-bench/leader/" + name
		if _, err := cli.Put(ctx, prefix+"/fence", fmt.Sprintf("%020d", 0)); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
				b.Error(err)
			}
		})
		return []string{"-backend", "etcd", "-endpoints", strings.Join(endpoints, ","), "-lock", prefix + "/lock", "-prefix", prefix}
	case "postgres":
		dsn := testserver.Postgres(b)
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		fence, logTable := pgx.Identifier{name + "_fence"}.Sanitize(), pgx.Identifier{name + "_log"}.Sanitize()
		for _, stmt := range []string{
			`CREATE TABLE ` + fence + ` (id int PRIMARY KEY, term bigint NOT NULL)`,
			`INSERT INTO ` + fence + ` VALUES (1, 0)`,
			`CREATE TABLE ` + logTable + ` (seq bigserial PRIMARY KEY, term bigint NOT NULL, identity text NOT NULL,
				start_ns bigint NOT NULL, end_ns bigint NOT NULL, late boolean NOT NULL)`,
		} {
			if _, err := pool.Exec(ctx, stmt); err != nil {
				b.Fatal(err)
			}
		}
		if err := leaderpg.NewLock(pool, name).EnsureSchema(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, stmt := range []string{`DROP TABLE ` + fence, `DROP TABLE ` + logTable} {
				if _, err := pool.Exec(ctx, stmt); err != nil {
					b.Error(err)
				}
			}
			if _, err := pool.Exec(ctx, `DELETE FROM `+leaderpg.DefaultTable+` WHERE name = $1`, name); err != nil {
				b.Error(err)
			}
		})
		return []string{"-backend", "postgres", "-dsn", dsn, "-lock", name, "-prefix", name}
	}
	b.Fatalf("unknown backend %q", backend)
	return nil
}
