//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/leader"
)

// This file runs internal/chaos/candidate processes for the fail-over
// benchmarks, with package internal/chaos/candidates (the harness of
// internal/chaos's tests, which also check the log). The candidate's output
// format is documented there.

// newCandidates returns a group of candidates running bin with args; a
// cleanup kills those still running.
func newCandidates(b *testing.B, bin string, args ...string) *candidates.Group {
	g := candidates.NewGroup(bin, "b", args...)
	b.Cleanup(func() {
		if err := g.KillAll(30 * time.Second); err != nil {
			b.Error(err)
		}
	})
	return g
}

// startCandidate starts a candidate and waits until it is ready.
func startCandidate(b *testing.B, g *candidates.Group) *candidates.Proc {
	b.Helper()
	p, err := g.Start()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// leaderAfter waits for the first accepted write of a term above after
// and returns its event.
func leaderAfter(b *testing.B, g *candidates.Group, after leader.Term, timeout time.Duration) candidates.Event {
	b.Helper()
	ev, ok := g.Await(timeout, func(ev candidates.Event) bool {
		return ev.Ev == "write" && ev.OK && ev.Term > after
	})
	if !ok {
		b.Fatalf("timed out after %v waiting for an accepted write of a term after %d", timeout, after)
	}
	return ev
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
			`scripts/servers.sh start; eval "$(scripts/servers.sh env)"; go -C bench test -run '^$' -bench LeaderFailover .; scripts/servers.sh stop`,
			env, backend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "bench_" + candidates.UniqueSuffix()
	var (
		s   *candidates.Store
		err error
	)
	switch backend {
	case "etcd":
		s, err = candidates.NewEtcdStore(ctx, testserver.Etcd(b), "/converge-bench/leader/"+name)
	case "postgres":
		s, err = candidates.NewPostgresStore(ctx, testserver.Postgres(b), name, name)
	default:
		err = fmt.Errorf("unknown backend %q", backend)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return s.Args
}
