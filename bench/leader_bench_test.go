//go:build linux

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
)

// leaderTiming is one elector configuration of the fail-over benchmarks.
type leaderTiming struct {
	name                string
	lease, renew, retry time.Duration
}

var leaderTimings = []leaderTiming{
	// client-go's defaults, which are also converge's.
	{"default", leader.DefaultLeaseDuration, leader.DefaultRenewDeadline, leader.DefaultRetryPeriod},
	// The shortest settings we consider safe, the ones internal/chaos runs
	// its kill, pause and restart tests with. Safety needs RenewDeadline ×
	// (1+ρ) + ε < LeaseDuration × (1−ρ) (see package leader): the 600ms
	// between them covers clock drift (ρ ≪ 0.1% on real clocks) and ε, the
	// time a leader's work takes to see its context cancelled, many times
	// over (scheduling delays on a loaded 2-core machine are tens of ms; a
	// process paused for longer is what fencing is for). RenewDeadline is
	// seven retry periods, so a leader rides out several failed renewals, a
	// PostgreSQL restart (~0.4s) or a single etcd's restart; retries every
	// 200ms cost a backend five small writes a second per lock. What they
	// do not ride out is a 3-node etcd cluster losing its raft leader:
	// writes stall ~2s (election timeout 1s, randomised), so the leader
	// steps down (safely); there, use RenewDeadline ≥ 3.5s (internal/chaos
	// uses 5s, 3.5s, 500ms). The lease is whole seconds because client-go
	// stores LeaseDurationSeconds as an integer: given 1.5s its candidates
	// take over after 1s, before a leader with a 1.05s RenewDeadline has
	// stepped down. Even so these timings are not safe for client-go: its
	// candidates restart their lease count only when the record's JSON
	// changes, and that holds RenewTime in whole seconds, so renewals within
	// one second look like none and a candidate may take over up to 1s
	// early (its crash fail-overs here are shorter than the lease), while
	// the leader leads for RenewDeadline after its last renewal: client-go
	// needs RetryPeriod ≥ 1s, or LeaseDuration − RenewDeadline > 1s.
	// converge compares the Lock's Version, which every write changes.
	{"short", 2 * time.Second, 1400 * time.Millisecond, 200 * time.Millisecond},
}

// failoverReps is how many fail-overs one b.N iteration measures: with
// the default timings one crash takes ~20s with its set-up, one release
// ~5s.
func failoverReps(fault string, tm leaderTiming) int {
	switch {
	case tm.name == "default" && fault == "release":
		return 3
	case tm.name == "default":
		return 1
	case fault == "release":
		return 10
	default:
		return 3
	}
}

// failoverCandidates is how many replicas campaign: a leader and two
// followers, as in a typical 3-replica deployment.
const failoverCandidates = 3

// BenchmarkLeaderFailover is scenario 10: the time from a leader's fault
// until another leader acts, in ms/failover (the mean over
// failoverReps(fault) fail-overs per b.N iteration, ns/op suppressed),
// with failoverCandidates replicas, one sub-benchmark per implementation,
// backend, fault and timing (leaderTimings), e.g.
// BenchmarkLeaderFailover/converge/etcd/kill/short:
//
//   - memory, in process: converge's elector on leader/memlock and, as the
//     reference, client-go's leaderelection with a resourcelock.LeaseLock
//     on a fake clientset. crash cancels the leader's Run without release
//     (it stops renewing, like a crashed process); release cancels it with
//     ReleaseOnCancel. The new leader acts when its OnStartedLeading runs.
//   - etcd and postgres: internal/chaos/candidate processes (built first)
//     against the servers of scripts/servers.sh, skipped when their
//     environment variables are absent. kill is SIGKILL of the leader's
//     process; release is SIGTERM (ReleaseOnCancel). The new leader acts
//     when its first fenced write is accepted.
//
// Each fault hits a leader whose followers retry at random phases to it
// (see failoverLoop). A crash costs LeaseDuration, give or take a retry
// period or two; a release a fraction of one. client-go's candidates retry
// every RetryPeriod × [1, 2.2] (wait.Jitter with its JitterFactor 1.2),
// converge's every RetryPeriod × [1, 1.2]: the same JitterFactor, read
// differently. The fail-overs of each run are logged.
func BenchmarkLeaderFailover(b *testing.B) {
	var candidate candidates.Binary // built by the first process benchmark
	b.Cleanup(func() {
		if err := candidate.Remove(); err != nil {
			b.Error(err)
		}
	})
	for _, tm := range leaderTimings {
		for _, fault := range []string{"crash", "release"} {
			b.Run("converge/memory/"+fault+"/"+tm.name, func(b *testing.B) {
				failoverInProcess(b, convergeMemoryElector(), fault, tm, convergeMaxWait)
			})
			if fault == "release" || tm.name == "short" {
				b.Run("client-go/memory/"+fault+"/"+tm.name, func(b *testing.B) {
					failoverInProcess(b, clientGoFakeElector(), fault, tm, clientGoMaxWait)
				})
			}
		}
	}
	for _, backend := range []string{"etcd", "postgres"} {
		for _, tm := range leaderTimings {
			for _, fault := range []string{"kill", "release"} {
				b.Run("converge/"+backend+"/"+fault+"/"+tm.name, func(b *testing.B) {
					args := candidateStore(b, backend) // skips without the server
					bin, err := candidate.Path()
					if err != nil {
						b.Fatal(err)
					}
					failoverProcesses(b, bin, args, fault, tm)
				})
			}
		}
	}
}

// runElector runs one elector with identity id on a lock shared by every
// elector of the same runElector until ctx is done, calling onLead when it
// starts leading.
type runElector func(ctx context.Context, id string, tm leaderTiming, release bool, onLead func()) error

func convergeMemoryElector() runElector {
	lock := memlock.NewLock()
	return func(ctx context.Context, id string, tm leaderTiming, release bool, onLead func()) error {
		e, err := leader.New(lock, leader.Config{
			Identity: id, LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry,
			ReleaseOnCancel:  release,
			OnStartedLeading: func(ctx context.Context) { onLead(); <-ctx.Done() },
		})
		if err != nil {
			return err
		}
		return e.Run(ctx)
	}
}

func clientGoFakeElector() runElector {
	cs := fake.NewClientset()
	return func(ctx context.Context, id string, tm leaderTiming, release bool, onLead func()) error {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: "bench"},
				Client:     cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id},
			},
			LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry,
			ReleaseOnCancel: release,
			Name:            "bench",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { onLead(); <-ctx.Done() },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return err
		}
		le.Run(klog.NewContext(ctx, logr.Discard())) // it logs every acquisition
		return nil
	}
}

// failoverTimeout bounds one fail-over: a lease and three of client-go's
// longest retry waits, and a margin.
func failoverTimeout(tm leaderTiming) time.Duration {
	return tm.lease + 3*time.Duration(2.2*float64(tm.retry)) + 10*time.Second
}

// Longest retry wait of a candidate, as a multiple of RetryPeriod:
// converge waits RetryPeriod × [1, JitterFactor], client-go RetryPeriod ×
// [1, 1+JitterFactor] (wait.Jitter).
const (
	convergeMaxWait = leader.DefaultJitterFactor
	clientGoMaxWait = 1 + leaderelection.JitterFactor
)

// failoverOps drives one set of electors sharing a lock.
type failoverOps struct {
	// start starts an elector and returns its identity once it runs.
	start func() string
	// stop stops a follower and waits until it has.
	stop func(id string)
	// first waits for the first elector started to lead and returns it.
	first func() string
	// fault faults the leader id, waits until another leader acts and the
	// old one is gone, and returns the new leader and the time from the
	// fault until it acted.
	fault func(id string) (string, time.Duration)
}

// failoverLoop measures reps fail-overs and reports their mean in
// ms/failover. Before each fault it replaces the followers by fresh ones,
// started at independent uniform times over one longest retry wait
// (window), and faults the leader a window plus a uniform part of another
// after that: so each follower's retries are at an independent, uniform
// phase to the fault, as in a deployment whose replicas started at
// unrelated times. (Reusing followers would not do: after a release the
// follower that lost the race retries in step with the winner, and jitter
// takes hundreds of periods to part them.)
func failoverLoop(b *testing.B, ops failoverOps, reps int, window time.Duration) {
	ops.start()
	ldr := ops.first()
	var followers []string
	var total time.Duration
	samples := make([]time.Duration, 0, reps)
	for range reps {
		for _, f := range followers {
			ops.stop(f)
		}
		followers = followers[:0]
		t0 := time.Now()
		offsets := make([]time.Duration, failoverCandidates-1)
		for i := range offsets {
			offsets[i] = rand.N(window)
		}
		slices.Sort(offsets)
		for _, d := range offsets {
			time.Sleep(time.Until(t0.Add(d)))
			followers = append(followers, ops.start())
		}
		time.Sleep(time.Until(t0.Add(window + rand.N(window))))
		next, took := ops.fault(ldr)
		if !slices.Contains(followers, next) {
			b.Fatalf("new leader %s is not one of the followers %v", next, followers)
		}
		followers = slices.DeleteFunc(followers, func(id string) bool { return id == next })
		ldr = next
		total += took
		samples = append(samples, took.Round(time.Millisecond))
	}
	b.Logf("fail-overs: %v", samples)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total.Seconds()*1000/float64(reps), "ms/failover")
}

func failoverInProcess(b *testing.B, run runElector, fault string, tm leaderTiming, maxWait float64) {
	type lead struct {
		id string
		at time.Time
	}
	type elector struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	led := make(chan lead, 16)
	electors := map[string]*elector{}
	b.Cleanup(func() {
		for _, e := range electors {
			e.cancel()
			<-e.done
		}
	})
	next := func() lead {
		select {
		case l := <-led:
			return l
		case <-time.After(failoverTimeout(tm)):
			b.Fatalf("no new leader within %v", failoverTimeout(tm))
			return lead{}
		}
	}
	stop := func(id string) {
		e := electors[id]
		e.cancel()
		<-e.done
		delete(electors, id)
	}
	n := 0
	failoverLoop(b, failoverOps{
		start: func() string {
			n++
			id := fmt.Sprintf("e%02d", n)
			ctx, cancel := context.WithCancel(context.Background())
			e := &elector{cancel: cancel, done: make(chan struct{})}
			electors[id] = e
			go func() {
				defer close(e.done)
				if err := run(ctx, id, tm, fault == "release", func() { led <- lead{id, time.Now()} }); err != nil {
					b.Error(err)
				}
			}()
			return id
		},
		stop:  stop,
		first: func() string { return next().id },
		fault: func(id string) (string, time.Duration) {
			at := time.Now()
			electors[id].cancel() // crash: stops renewing; release: also releases
			l := next()
			stop(id)
			return l.id, l.at.Sub(at)
		},
	}, b.N*failoverReps(fault, tm), time.Duration(maxWait*float64(tm.retry)))
}

func failoverProcesses(b *testing.B, bin string, args []string, fault string, tm leaderTiming) {
	args = append(append(slices.Clone(args), candidates.TimingArgs(tm.lease, tm.renew, tm.retry)...), "-release=true")
	sig := syscall.SIGKILL
	if fault == "release" {
		sig = syscall.SIGTERM
	}
	c := newCandidates(b, bin, args...)
	wait := func(p *candidates.Proc) {
		if _, err := p.Wait(30 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
	var cur candidates.Event
	failoverLoop(b, failoverOps{
		start: func() string { return startCandidate(b, c).ID() },
		stop: func(id string) {
			p := c.Proc(id)
			_, _ = p.Signal(syscall.SIGKILL)
			wait(p)
		},
		first: func() string {
			cur = leaderAfter(b, c, 0, failoverTimeout(tm))
			return cur.ID
		},
		fault: func(id string) (string, time.Duration) {
			p := c.Proc(id)
			at, err := p.Signal(sig)
			if err != nil {
				b.Fatal(err)
			}
			cur = leaderAfter(b, c, cur.Term, failoverTimeout(tm))
			wait(p)
			return cur.ID, time.Duration(cur.Done - at)
		},
	}, b.N*failoverReps(fault, tm), time.Duration(convergeMaxWait*float64(tm.retry)))
}
