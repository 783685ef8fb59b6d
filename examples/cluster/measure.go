package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/examples/cluster/ctl"
	osproc "github.com/converge-go/converge/examples/internal/proc"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/object"
)

// measureConfig is measure's command line.
type measureConfig struct {
	nodes, pods, deployments int
	timings                  string
	fake                     bool
	timeout                  time.Duration
	report                   string
}

// MeasureReport is what measure observed, for --report.
type MeasureReport struct {
	Nodes       int    `json:"nodes"`
	Pods        int    `json:"pods"`
	Deployments int    `json:"deployments"`
	Timings     string `json:"timings"`
	// FakeContainers: the agents ran no process for the containers.
	FakeContainers bool `json:"fakeContainers"`
	// Idle is the control plane once the nodes joined, before the apply;
	// Loaded once every pod runs and the writes have settled.
	Idle   ProcessStats `json:"idle"`
	Loaded ProcessStats `json:"loaded"`
	// AgentsCPU is the CPU time all the agents used from the apply until
	// the writes settled (0 where there is no /proc).
	AgentsCPU time.Duration `json:"agentsCpuNanos"`
	// AllCreated, AllBound and AllRunning are from the start of `ctl
	// apply` to the last pod created, bound, and Running and Ready.
	AllCreated time.Duration `json:"allCreatedNanos"`
	AllBound   time.Duration `json:"allBoundNanos"`
	AllRunning time.Duration `json:"allRunningNanos"`
	// Window is from the apply to the writes settled; Kinds the store
	// traffic in it, by kind.
	Window time.Duration         `json:"windowNanos"`
	Kinds  map[string]KindCounts `json:"kinds"`
	// PodBinds and PodOtherUpdates split the pod updates this command's
	// watch saw: a pod's node set (the scheduler's bind), and the rest
	// (the agents' status writes, the node lifecycle's).
	PodBinds        int `json:"podBinds"`
	PodOtherUpdates int `json:"podOtherUpdates"`
	// EventRecords counts the event records first recorded in the
	// window, by "source reason".
	EventRecords map[string]int `json:"eventRecords"`
}

func measureMode(args []string, stdout, stderr io.Writer) int {
	cfg := measureConfig{}
	fl := flag.NewFlagSet("measure", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.IntVar(&cfg.nodes, "nodes", 5, "how many nodes (agents)")
	fl.IntVar(&cfg.pods, "pods", 60, "how many pods, over all the Deployments")
	fl.IntVar(&cfg.deployments, "deployments", 0, "how many Deployments share the pods (default: one per 50 pods)")
	fl.StringVar(&cfg.timings, "timings", "fast", "fast or kube")
	fl.BoolVar(&cfg.fake, "fake-containers", true, "the agents run no process for the containers (false: a real `cluster worker` each)")
	fl.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "how long each stage may take")
	fl.StringVar(&cfg.report, "report", "", "also write the figures, as JSON, to this file")
	controlPlane := fl.Bool("control-plane", false, "be the measured control plane (measure starts itself so)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *controlPlane {
		err = measuredControlPlane(ctx, cfg.timings, stdout, stderr)
	} else {
		err = runMeasure(ctx, cfg, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cluster measure: %v\n", err)
		return 1
	}
	return 0
}

// runMeasure starts the counted control plane as a child process, the
// agents, applies the Deployments with `ctl apply`, waits for every pod to
// run and the writes to settle, and prints (and writes) the figures.
func runMeasure(ctx context.Context, cfg measureConfig, out io.Writer) error {
	if cfg.deployments == 0 {
		cfg.deployments = (cfg.pods + 49) / 50
	}
	switch {
	case cfg.nodes < 1 || cfg.pods < 1:
		return fmt.Errorf("--nodes %d --pods %d: want at least one of each", cfg.nodes, cfg.pods)
	case cfg.deployments < 1 || cfg.deployments > cfg.pods:
		return fmt.Errorf("--deployments %d: want 1 to --pods (%d)", cfg.deployments, cfg.pods)
	}
	if _, err := parseTimings(cfg.timings); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cluster-measure-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The control plane and the agents die with this process, even if it
	// is killed by SIGKILL (on Linux).
	children := osproc.NewChildren()
	defer children.Close() // after the deferred wait below
	cp := exec.Command(self, "measure", "--control-plane", "--timings", cfg.timings)
	cp.Stderr = os.Stderr
	pipe, err := cp.StdoutPipe()
	if err != nil {
		return err
	}
	if err := children.Start(cp); err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range append(procs, cp) {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	lines := bufio.NewReader(pipe)
	apiURL, err1 := lines.ReadString('\n')
	statsURL, err2 := lines.ReadString('\n')
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("the control plane did not start: %w", err)
	}
	apiURL, statsURL = strings.TrimSpace(apiURL), strings.TrimSpace(statsURL)
	st, err := apiserver.NewStores(apiURL, "", httpstore.ClientOptions{})
	if err != nil {
		return err
	}
	m := &measurement{ctx: ctx, cfg: cfg, st: st, url: apiURL, statsURL: statsURL, agents: &procs, out: out, start: time.Now(),
		rep: MeasureReport{Nodes: cfg.nodes, Pods: cfg.pods, Deployments: cfg.deployments, Timings: cfg.timings,
			FakeContainers: cfg.fake}}
	m.logf("control plane (pid %d) on %s, counted under its admission; its figures and profiles on %s",
		cp.Process.Pid, apiURL, strings.TrimSuffix(statsURL, "/stats"))

	// The agents are OS processes, as in a real cluster: in this process
	// they would share its CPU and, on a busy machine, miss their lease
	// renewals.
	for i := range cfg.nodes {
		node := fmt.Sprintf("n%d", i+1)
		p := exec.Command(self, "agent", "--node", node, "--api", apiURL, "--timings", cfg.timings,
			"--log-dir", dir, "--log-level", "none", fmt.Sprintf("--fake-containers=%t", cfg.fake))
		if err := children.Start(p); err != nil {
			return err
		}
		procs = append(procs, p)
	}
	if err := m.measure(filepath.Join(dir, "load.yaml")); err != nil {
		return err
	}
	m.print()
	if cfg.report == "" {
		return nil
	}
	b, err := json.MarshalIndent(m.rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(cfg.report, append(b, '\n'), 0o644)
}

// measurement is one run of measure.
type measurement struct {
	ctx      context.Context
	cfg      measureConfig
	st       api.Stores
	url      string
	statsURL string
	agents   *[]*exec.Cmd
	out      io.Writer
	start    time.Time
	rep      MeasureReport
}

func (m *measurement) logf(format string, args ...any) {
	fmt.Fprintf(m.out, "[%7.2fs] %s\n", time.Since(m.start).Seconds(), fmt.Sprintf(format, args...))
}

// stats reads the control plane's /stats.
func (m *measurement) stats() (controlPlaneStats, error) {
	var st controlPlaneStats
	req, err := http.NewRequestWithContext(m.ctx, http.MethodGet, m.statsURL, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// poll calls cond every interval until it is done, for at most the
// configured timeout.
func (m *measurement) poll(what string, interval time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(m.cfg.timeout)
	for {
		done, seen, err := cond()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (%s)", what, m.cfg.timeout, seen)
		}
		select {
		case <-m.ctx.Done():
			return fmt.Errorf("%s: %w (%s)", what, m.ctx.Err(), seen)
		case <-time.After(interval):
		}
	}
}

// measure waits for the nodes, applies the Deployments (written to
// manifest) and follows them until they run and the writes settle.
func (m *measurement) measure(manifest string) error {
	err := m.poll("nodes Ready", 100*time.Millisecond, func() (bool, string, error) {
		entries, _, err := m.st.Nodes.List(m.ctx)
		ready := 0
		for _, e := range entries {
			if e.Err == nil && object.IsTrue(e.Value.Status.Conditions, api.NodeReady) {
				ready++
			}
		}
		return ready >= m.cfg.nodes, fmt.Sprintf("%d of %d nodes Ready", ready, m.cfg.nodes), err
	})
	if err != nil {
		return err
	}
	idle, err := m.stats()
	if err != nil {
		return err
	}
	m.rep.Idle = idle.Process
	m.logf("%d nodes Ready (an agent process each%s); control plane: %s", m.cfg.nodes, fakeNote(m.cfg.fake), idle.Process)

	if err := os.WriteFile(manifest, []byte(loadManifest(m.cfg.pods, m.cfg.deployments)), 0o644); err != nil {
		return err
	}
	pods := newPodTracker(m.cfg.pods)
	wctx, stopWatch := context.WithCancel(m.ctx)
	defer stopWatch()
	watchErr, err := pods.follow(wctx, m.st.Pods)
	if err != nil {
		return err
	}
	agentsCPU := m.agentsCPU()
	t0 := time.Now()
	pods.since(t0)
	var ctlOut strings.Builder
	if code := ctl.Main([]string{"--api", m.url, "apply", "-f", manifest}, &ctlOut, &ctlOut); code != 0 {
		return fmt.Errorf("ctl apply: %s", ctlOut.String())
	}
	m.logf("ctl apply -f: %d Deployments, %d pods in all", m.cfg.deployments, m.cfg.pods)
	select {
	case <-pods.done:
	case err := <-watchErr:
		return fmt.Errorf("the pod watch ended: %w", err)
	case <-time.After(m.cfg.timeout):
		return fmt.Errorf("the pods did not all run within %v: %s", m.cfg.timeout, pods)
	case <-m.ctx.Done():
		return m.ctx.Err()
	}
	m.rep.AllCreated, m.rep.AllBound, m.rep.AllRunning = pods.times()
	m.logf("all %d pods Running and Ready %v after the apply (created by %v, bound by %v)", m.cfg.pods,
		m.rep.AllRunning.Round(time.Millisecond), m.rep.AllCreated.Round(time.Millisecond), m.rep.AllBound.Round(time.Millisecond))

	final, err := m.settle()
	if err != nil {
		return err
	}
	m.rep.Window = time.Since(t0)
	m.rep.AgentsCPU = m.agentsCPU() - agentsCPU
	m.rep.Loaded = final.Process
	m.rep.Kinds = map[string]KindCounts{}
	for k, c := range final.Kinds {
		m.rep.Kinds[k] = c.minus(idle.Kinds[k])
	}
	m.rep.PodBinds, m.rep.PodOtherUpdates = pods.updates()
	evs, _, err := m.st.Events.List(m.ctx)
	if err != nil {
		return err
	}
	m.rep.EventRecords = map[string]int{}
	for _, e := range evs {
		if e.Err == nil && !e.Value.First.Before(t0) {
			m.rep.EventRecords[e.Value.Source+" "+e.Value.Reason]++
		}
	}
	m.logf("settled; control plane: %s", final.Process)
	return nil
}

// settle waits for every Deployment to report its replicas available,
// then for a second without a write of a workload kind, and returns the
// control plane's stats then.
func (m *measurement) settle() (controlPlaneStats, error) {
	err := m.poll("Deployments available", 100*time.Millisecond, func() (bool, string, error) {
		entries, _, err := m.st.Deployments.List(m.ctx)
		avail := 0
		for _, e := range entries {
			if e.Err == nil && e.Value.Status.AvailableReplicas == api.Replicas(e.Value.Spec.Replicas) &&
				e.Value.Status.ObservedGeneration == e.Value.Generation {
				avail++
			}
		}
		return avail == m.cfg.deployments, fmt.Sprintf("%d of %d Deployments available", avail, m.cfg.deployments), err
	})
	if err != nil {
		return controlPlaneStats{}, err
	}
	var last int64 = -1
	var quietSince time.Time
	err = m.poll("writes settled", 250*time.Millisecond, func() (bool, string, error) {
		st, err := m.stats()
		if err != nil {
			return false, "", err
		}
		var n int64
		for _, k := range []string{"deployments", "replicasets", "pods", "events"} {
			n += st.Kinds[k].Writes()
		}
		if n != last {
			last, quietSince = n, time.Now()
		}
		return time.Since(quietSince) >= time.Second, fmt.Sprintf("%d writes", n), nil
	})
	if err != nil {
		return controlPlaneStats{}, err
	}
	return m.stats()
}

func fakeNote(fake bool) string {
	if fake {
		return ", fake containers: pods Running with no process"
	}
	return ", a process per container"
}

func (ps ProcessStats) String() string {
	return fmt.Sprintf("RSS %s (peak %s), live heap %s, Go memory %s, %d goroutines",
		mib(ps.RSS), mib(ps.PeakRSS), mib(ps.LiveHeap), mib(ps.GoMemory), ps.Goroutines)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// print prints the figures as a table.
func (m *measurement) print() {
	r := m.rep
	fmt.Fprintf(m.out, "\ncontrol plane at %d nodes / %d pods (%d Deployments, %s timings, an agent process a node%s):\n",
		r.Nodes, r.Pods, r.Deployments, r.Timings, fakeNote(r.FakeContainers))
	fmt.Fprintf(m.out, "  idle, nodes only:  %s\n  all pods Running:  %s\n", r.Idle, r.Loaded)
	fmt.Fprintf(m.out, "  CPU from the apply until settled: control plane %v, agents %v\n",
		(r.Loaded.CPU - r.Idle.CPU).Round(time.Millisecond), r.AgentsCPU.Round(time.Millisecond))
	fmt.Fprintf(m.out, "  apply to all created %v, all bound %v, all Running %v\n",
		r.AllCreated.Round(time.Millisecond), r.AllBound.Round(time.Millisecond), r.AllRunning.Round(time.Millisecond))
	fmt.Fprintf(m.out, "\nstore writes from the apply until settled (%v), by kind and verb, and the watch events they caused:\n",
		r.Window.Round(time.Millisecond))
	fmt.Fprintf(m.out, "  %-12s %7s %7s %7s %9s %12s %8s %14s\n", "kind", "create", "update", "delete", "conflict", "watch events", "watches", "events/write")
	var total KindCounts
	for _, k := range measuredKinds {
		c := r.Kinds[k]
		perWrite := "-"
		if c.Writes() > 0 {
			perWrite = fmt.Sprintf("%.1f", float64(c.WatchEvents)/float64(c.Writes()))
		}
		fmt.Fprintf(m.out, "  %-12s %7d %7d %7d %9d %12d %8d %14s\n", k, c.Creates, c.Updates, c.Deletes, c.Conflicts, c.WatchEvents, c.Watches, perWrite)
		if k != "nodes" && k != "leases" {
			total.Creates, total.Updates, total.Deletes = total.Creates+c.Creates, total.Updates+c.Updates, total.Deletes+c.Deletes
		}
	}
	fmt.Fprintf(m.out, "  pod updates seen by this command's watch: %d binds, %d others (status)\n", r.PodBinds, r.PodOtherUpdates)
	var recs []string
	for _, k := range slices.Sorted(maps.Keys(r.EventRecords)) {
		recs = append(recs, fmt.Sprintf("%s %d", k, r.EventRecords[k]))
	}
	fmt.Fprintf(m.out, "  event records: %s\n", strings.Join(recs, ", "))
	fmt.Fprintf(m.out, "  workload writes (all but nodes and leases, the agents' heartbeats): %d, %.2f a pod\n",
		total.Writes(), float64(total.Writes())/float64(r.Pods))
	fmt.Fprintf(m.out, "  watches: the controllers' informers (one a kind), each agent's pod watch, and this command's pod watch\n")
}

// loadManifest returns deployments Deployments whose replicas add up to
// pods, as one YAML stream for `ctl apply -f`.
func loadManifest(pods, deployments int) string {
	var b strings.Builder
	for i := range deployments {
		replicas := pods / deployments
		if i < pods%deployments {
			replicas++
		}
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: load-%[1]d, namespace: default}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: load-%[1]d}}
  template:
    metadata: {labels: {app: load-%[1]d}}
    spec:
      containers:
      - name: c
        command: [%[3]s, worker]
        resources: {requests: {cpu: 10m, memory: 16Mi}}
`, i, replicas, agent.SelfCommand)
	}
	return b.String()
}

// agentsCPU returns the user and system CPU time the agent processes have
// used, from /proc/PID/stat (utime and stime, in the kernel's 100 ticks a
// second); 0 where there is no /proc.
func (m *measurement) agentsCPU() time.Duration {
	var ticks int64
	for _, p := range *m.agents {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": utime and stime are the 14th and
		// 15th fields, the 12th and 13th after the command's ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		for _, s := range f[11:13] {
			n, _ := strconv.ParseInt(s, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
