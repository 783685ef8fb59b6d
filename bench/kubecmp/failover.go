package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// leaseTiming is one election configuration, the same for both libraries:
// the two of the bench module's BenchmarkLeaderFailover.
type leaseTiming struct {
	lease, renew, retry time.Duration
}

var leaseTimings = map[string]leaseTiming{
	// client-go's defaults, which are also converge's and
	// controller-runtime's.
	"default": {15 * time.Second, 10 * time.Second, 2 * time.Second},
	// The short setting of the fail-over benchmarks. client-go's elector
	// compares the Lease's renewTime in whole seconds, so with a retry
	// period under 1s it may take over up to 1s before the lease has run
	// out: its fail-overs here can be shorter than the lease.
	"short": {2 * time.Second, 1400 * time.Millisecond, 200 * time.Millisecond},
}

// clientGoMaxWait is the longest retry wait of client-go's candidates as
// a multiple of RetryPeriod (wait.Jitter with JitterFactor 1.2), the
// longer of the two libraries' (converge's is 1.2).
const clientGoMaxWait = 2.2

// failoverObjects is how many objects each fail-over namespace holds: the
// new leader's first reconcile comes with its first object, so the count
// matters little.
const failoverObjects = 100

// candidateArgs makes a child a fail-over candidate.
type candidateArgs struct {
	ID    string        `json:"id"`
	Lease time.Duration `json:"lease"`
	Renew time.Duration `json:"renew"`
	Retry time.Duration `json:"retry"`
}

// runCandidate runs in a candidate child: the controller with leader
// election, until it is killed. It prints "ready" once its cache has
// synced and "lead <unix ns>" at the start of its first reconcile, which
// only a leader runs.
func runCandidate(ctx context.Context, cfg *rest.Config, a childArgs, out io.Writer) error {
	run, err := runnerOf(a.Impl, a.Resource)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	println := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, line)
	}
	var first sync.Once
	c := a.Candidate
	stop, err := run(ctx, cfg, runSpec{
		ns: a.NS, resource: a.Resource,
		election: &election{id: c.ID, lease: c.Lease, renew: c.Renew, retry: c.Retry},
		entered: func() {
			at := time.Now().UnixNano()
			first.Do(func() { println("lead " + strconv.FormatInt(at, 10)) })
		},
		done: func(string, string) {},
	})
	if err != nil {
		return err
	}
	println("ready")
	<-ctx.Done()
	stop()
	return nil
}

// candidate is a candidate child as the parent sees it.
type candidate struct {
	cmd   *exec.Cmd
	ready chan struct{}  // closed when it printed "ready"
	lead  chan time.Time // its "lead" time
	ended chan struct{}  // closed when it exited
	err   error          // cmd.Wait's, once ended is closed
}

func startCandidate(ctx context.Context, o options, a childArgs, log io.Writer) (*candidate, error) {
	cmd, err := childCommand(ctx, o, a)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &candidate{cmd: cmd, ready: make(chan struct{}), lead: make(chan time.Time, 1), ended: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready":
				close(c.ready)
			case strings.HasPrefix(line, "lead "):
				ns, err := strconv.ParseInt(strings.TrimPrefix(line, "lead "), 10, 64)
				if err == nil {
					c.lead <- time.Unix(0, ns)
				}
			}
		}
		c.err = cmd.Wait()
		close(c.ended)
	}()
	return c, nil
}

// kill SIGKILLs the candidate and waits until it has exited.
func (c *candidate) kill() {
	_ = c.cmd.Process.Kill()
	<-c.ended
}

// waitReady waits for c's cache to be synced.
func (c *candidate) waitReady(ctx context.Context, timeout time.Duration) error {
	select {
	case <-c.ready:
		return nil
	case <-c.ended:
		return fmt.Errorf("candidate exited before it was ready: %v", c.err)
	case <-time.After(timeout):
		return fmt.Errorf("candidate not ready within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitLead waits for c's first reconcile as a leader and returns its time.
func (c *candidate) waitLead(ctx context.Context, timeout time.Duration) (time.Time, error) {
	select {
	case at := <-c.lead:
		return at, nil
	case <-c.ended:
		return time.Time{}, fmt.Errorf("candidate exited before it led: %v", c.err)
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("candidate did not lead within %s", timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// chain is one implementation's candidates in its own namespace: the
// leader, replaced by its standby at each fail-over.
type chain struct {
	impl, ns string
	leader   *candidate
	next     int // the next candidate's number
}

func (ch *chain) args(o options, tm leaseTiming) childArgs {
	ch.next++
	return childArgs{Impl: ch.impl, NS: ch.ns, Resource: o.resource, Objects: failoverObjects, Timeout: o.timeout,
		Candidate: &candidateArgs{ID: fmt.Sprintf("%s-%d", ch.impl, ch.next), Lease: tm.lease, Renew: tm.renew, Retry: tm.retry}}
}

// failoverTimeout bounds one fail-over: a lease, three of the longest
// retry waits, and a margin.
func failoverTimeout(tm leaseTiming) time.Duration {
	return tm.lease + 3*time.Duration(clientGoMaxWait*float64(tm.retry)) + 10*time.Second
}

// failover starts a standby, waits until its cache has synced, waits a
// random time (so that its retries are at a random phase to the kill),
// SIGKILLs the leader and returns the time from the kill to the standby's
// first reconcile. The standby is the chain's leader after it.
func (ch *chain) failover(ctx context.Context, o options, tm leaseTiming, log io.Writer) (time.Duration, error) {
	standby, err := startCandidate(ctx, o, ch.args(o, tm), log)
	if err != nil {
		return 0, err
	}
	if err := standby.waitReady(ctx, time.Minute); err != nil {
		standby.kill()
		return 0, fmt.Errorf("%s standby: %w", ch.impl, err)
	}
	window := time.Duration(clientGoMaxWait * float64(tm.retry))
	time.Sleep(window + rand.N(window))
	killed := time.Now()
	ch.leader.kill()
	ch.leader = standby
	at, err := standby.waitLead(ctx, failoverTimeout(tm))
	if err != nil {
		return 0, fmt.Errorf("%s standby after the leader's SIGKILL: %w", ch.impl, err)
	}
	return at.Sub(killed), nil
}

// measureFailover measures o.reps fail-overs per implementation and lease
// timing, the implementations taking turns, and prints the table.
func measureFailover(ctx context.Context, o options, out, log io.Writer) error {
	for _, name := range o.failover {
		if _, ok := leaseTimings[name]; !ok {
			return fmt.Errorf("-failover: unknown lease timing %q", name)
		}
	}
	cfg, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	// The candidates' stderr is copied to log while others run.
	log = &syncWriter{w: log}
	all := map[string]map[string][]time.Duration{}
	for _, name := range o.failover {
		tm := leaseTimings[name]
		all[name], err = failovers(ctx, cfg, o, tm, log)
		if err != nil {
			return fmt.Errorf("fail-over, %s lease timing: %w", name, err)
		}
	}
	printFailoverTable(out, o, all)
	return nil
}

// failovers measures one lease timing: a chain per implementation, each
// with its leader, then o.reps fail-overs of each, in rotating order.
func failovers(ctx context.Context, cfg *rest.Config, o options, tm leaseTiming, log io.Writer) (map[string][]time.Duration, error) {
	chains := make([]*chain, len(o.impls))
	defer func() {
		for _, ch := range chains {
			if ch == nil || ch.ns == "" {
				continue
			}
			if ch.leader != nil {
				ch.leader.kill()
			}
			if err := cleanUp(context.WithoutCancel(ctx), cfg, o.resource, ch.ns); err != nil {
				fmt.Fprintln(log, "kubecmp: clean-up:", err)
			}
		}
	}()
	for i, impl := range o.impls {
		ns, err := prepare(ctx, cfg, o.resource, failoverObjects)
		chains[i] = &chain{impl: impl, ns: ns}
		if err != nil {
			return nil, err
		}
		c, err := startCandidate(ctx, o, chains[i].args(o, tm), log)
		if err != nil {
			return nil, err
		}
		chains[i].leader = c
		if _, err := c.waitLead(ctx, failoverTimeout(tm)); err != nil {
			return nil, fmt.Errorf("%s first leader: %w", impl, err)
		}
	}
	out := map[string][]time.Duration{}
	for rep := range o.reps {
		for i := range chains {
			ch := chains[(i+rep)%len(chains)]
			took, err := ch.failover(ctx, o, tm, log)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(log, "kubecmp: fail-over lease %s rep=%d %s: %.0f ms\n", tm.lease, rep+1, ch.impl, took.Seconds()*1000)
			out[ch.impl] = append(out[ch.impl], took)
		}
	}
	return out, nil
}

// printFailoverTable prints a row per lease timing: each implementation's
// median [min..max] fail-over, and converge's median ÷ controller-runtime's.
func printFailoverTable(w io.Writer, o options, all map[string]map[string][]time.Duration) {
	fmt.Fprintf(w, "Leader fail-over after SIGKILL, two candidate processes per library on one kube-apiserver, a Lease each (converge: kube.Lock; controller-runtime: its leader election), %d objects; from the kill to the standby's first reconcile; median [min..max] of %d; %s, GOMAXPROCS=%d.\n",
		failoverObjects, o.reps, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Command: go -C bench run ./kubecmp -failover %s -resource %s -impl %s -reps %d\n\n",
		strings.Join(o.failover, ","), o.resource, strings.Join(o.impls, ","), o.reps)
	fmt.Fprintf(w, "| lease / renew / retry | %s |", strings.Join(o.impls, " | "))
	var others []string
	for _, impl := range o.impls {
		if impl != implControllerRuntime {
			others = append(others, impl)
			fmt.Fprintf(w, " %s ÷ cr |", impl)
		}
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(o.impls)+len(others)))
	for _, name := range o.failover {
		tm := leaseTimings[name]
		fmt.Fprintf(w, "| %s / %s / %s (%s) |", tm.lease, tm.renew, tm.retry, name)
		med := map[string]float64{}
		for _, impl := range o.impls {
			xs := make([]float64, len(all[name][impl]))
			for i, d := range all[name][impl] {
				xs[i] = d.Seconds()
			}
			m, lo, hi := medianRange(xs)
			med[impl] = m
			fmt.Fprintf(w, " %s [%s..%s] s |", num(m), num(lo), num(hi))
		}
		for _, impl := range others {
			if cr := med[implControllerRuntime]; cr > 0 {
				fmt.Fprintf(w, " %.2f |", med[impl]/cr)
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
}

// syncWriter serialises the writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
