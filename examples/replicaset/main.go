// Command replicaset is Kubernetes' self-healing ReplicaSet on a laptop:
// declare 3 replicas and 3 real processes run; kill one and it is back in
// milliseconds; a process that keeps crashing is restarted with an
// exponential back-off; delete the ReplicaSet and its processes are gone.
//
// Two controllers share one reconcile.Manager, as in Kubernetes: the
// ReplicaSet controller creates and deletes Pod objects, and a node agent
// (a tiny kubelet) runs one OS process per Pod and reports its status.
// Desired state lives in the embedded memory store, or in etcd.
//
//	replicaset demo                  # the scripted scene, as a timeline
//	replicaset run [--addr ...]      # keep running; change it over HTTP
//	replicaset run --store etcd://127.0.0.1:2379   # ... or with etcdctl
//	replicaset run --store sqlite://state.db       # ... kept in a file across restarts
//	replicaset describe web          # as kubectl describe, with its events
//	replicaset worker [--crash-after 1s] [--exit-code 3]   # what pods run
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// config is the command line of run and demo.
type config struct {
	store, prefix, node     string
	addr, managerAddr       string
	backoffBase, backoffCap time.Duration
	logLevel, report        string
}

func realMain(args []string, stdout, stderr io.Writer) int {
	mode := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	switch mode {
	case "worker":
		return worker(args)
	case "describe":
		return describeMode(args, stdout, stderr)
	case "run", "demo":
	default:
		fmt.Fprintf(stderr, "usage: replicaset [run|demo|describe|worker] [flags]; unknown mode %q\n", mode)
		return 2
	}
	demo := mode == "demo"
	var cfg config
	fl := flag.NewFlagSet(mode, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&cfg.store, "store", "memory", "where desired state lives: memory, etcd://host:port[,host:port], postgres://user@host:port/db, or sqlite://PATH (a file)")
	fl.StringVar(&cfg.prefix, "prefix", "/converge-demo/", "etcd key prefix (replicasets/ and pods/ under it); on PostgreSQL the schema's name, from its letters and digits")
	fl.StringVar(&cfg.node, "node", "local", "the node this agent runs pods for")
	fl.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "run: address of the HTTP API (port 0 picks one)")
	fl.StringVar(&cfg.managerAddr, "manager-addr", pick(demo, "off", "127.0.0.1:8081"), `the Manager's /healthz, /readyz, /metrics and /debug/converge/ ("off": none)`)
	fl.DurationVar(&cfg.backoffBase, "backoff-base", pick(demo, 200*time.Millisecond, 10*time.Second), "CrashLoopBackOff: first restart delay (kubelet: 10s)")
	fl.DurationVar(&cfg.backoffCap, "backoff-cap", pick(demo, 5*time.Second, 5*time.Minute), "CrashLoopBackOff: longest restart delay (kubelet: 5m)")
	fl.StringVar(&cfg.logLevel, "log-level", pick(demo, "none", "info"), "controller logs on stderr: debug, info, warn, error or none")
	fl.StringVar(&cfg.report, "report", "", "demo: also write what was observed, as JSON, to this file")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if err := runMode(demo, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "replicaset %s: %v\n", mode, err)
		return 1
	}
	return 0
}

func pick[T any](demo bool, inDemo, inRun T) T {
	if demo {
		return inDemo
	}
	return inRun
}

func runMode(demo bool, cfg config, stdout, stderr io.Writer) error {
	logger, err := newLogger(cfg.logLevel, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if demo && cfg.store != "memory" {
		// A fresh prefix, so that the demo starts from nothing.
		cfg.prefix = strings.TrimSuffix(cfg.prefix, "/") + "-" + suffix() + "/"
	}
	st, err := openStores(cfg.store, cfg.prefix)
	if err != nil {
		return err
	}
	defer st.close()
	var output *os.File
	if f, ok := stderr.(*os.File); ok && !demo {
		output = f // the workers' lines, among the logs
	}
	sys, err := newSystem(cfg, st, logger, output)
	if err != nil {
		return err
	}
	defer sys.agent.shutdown()
	if demo {
		return runDemo(ctx, sys, cfg, stdout)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	if err := sys.mgr.AddFunc("http-api", func(ctx context.Context) error { return serveAPI(ctx, ln, st) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replicaset: API on http://%s (desired state in %s); Ctrl-C stops it and its processes\n", ln.Addr(), st.describe)
	return sys.mgr.Run(ctx)
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	if level == "none" {
		return slog.New(slog.DiscardHandler), nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// system is the two controllers, their informers and the Manager.
type system struct {
	mgr    *reconcile.Manager
	agent  *agent
	stores *stores
}

// newSystem builds the program: the controllers over st, with OS processes
// whose output goes to output (nil: /dev/null), in one Manager.
func newSystem(cfg config, st *stores, logger *slog.Logger, output *os.File) (*system, error) {
	reg := prometheus.NewRegistry()
	rec, err := newEventRecorders(st.events)
	if err != nil {
		return nil, err
	}
	c, err := newControllers(cfg, st, logger, parts{runner: newOSRunner(output), suffix: suffix, rsEvents: rec.rs, agentEvents: rec.agent},
		reconcile.WithMetrics(reg), reconcile.WithShutdownGrace(5*time.Second))
	if err != nil {
		return nil, err
	}
	serving := cfg.managerAddr != "" && cfg.managerAddr != "off"
	mgr, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: cfg.managerAddr, Gatherer: reg,
		Logger: logger, ShutdownTimeout: 20 * time.Second,
		// The debug pages, on the same loopback server: /debug/converge/.
		Debug: reconcile.DebugOptions{Enabled: serving, Refresh: 2 * time.Second}})
	if err != nil {
		return nil, err
	}
	// A deleted ReplicaSet's or pod's events go with it; the others expire
	// after the sinks' TTL.
	_, rsErr := c.rsInf.AddHandler(events.DeletionHandler[string, ReplicaSet](rec.rsSink))
	_, podErr := c.podInf.AddHandler(events.DeletionHandler[string, Pod](rec.podSink))
	for _, err := range []error{
		rsErr, podErr,
		// Each controller brings the informers it watches.
		mgr.AddController(c.rs),
		mgr.AddController(c.agent),
		// When the Manager stops, the agent stops its processes.
		mgr.AddFunc("node-agent-processes", c.ag.run),
		// The events, written to the store for describe.
		mgr.AddFunc("events", rec.run),
	} {
		if err != nil {
			return nil, err
		}
	}
	return &system{mgr: mgr, agent: c.ag, stores: st}, nil
}

// parts are what the controllers are made of besides the configuration
// and the stores: real ones in the program, simulated ones under the
// simulation kit (sim_test.go).
type parts struct {
	runner runner        // runs the pods' processes
	suffix func() string // the random part of new pods' names
	// rsEvents and agentEvents record the controllers' events; nil: none.
	rsEvents, agentEvents *events.Recorder
	// workers is each controller's; 0: 2 for the ReplicaSet controller, 4
	// for the agent. The kit wants 1, so that writes come in one order.
	workers int
	// wrap wraps each reconciler (the kit counts reconciles); nil: none.
	wrap func(controller string, r reconcile.Reconciler[string]) reconcile.Reconciler[string]
	// withoutHeadBarrier leaves the head barrier off, as the program ran
	// before it turned it on (the kit's finding that it closes).
	withoutHeadBarrier bool
}

// controllers are the two controllers and their informers, not yet
// running: a Manager (newSystem) or the simulation kit runs them.
type controllers struct {
	rsInf     *informer.Informer[string, ReplicaSet]
	podInf    *informer.Informer[string, Pod]
	rs, agent *reconcile.Controller[string]
	ag        *agent
}

// newControllers builds the ReplicaSet controller and the node agent over
// st, logging to logger, with opts added to each controller's options.
func newControllers(cfg config, st *stores, logger *slog.Logger, p parts, opts ...reconcile.Option) (*controllers, error) {
	if cfg.backoffBase <= 0 || cfg.backoffCap < cfg.backoffBase {
		return nil, errors.New("need 0 < --backoff-base <= --backoff-cap")
	}
	rsInf, err := informer.New("replicasets", st.replicaSets, informer.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	podInf, err := informer.New("pods", st.pods, informer.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	c := &controllers{rsInf: rsInf, podInf: podInf}
	workers := func(def int) reconcile.Option { return reconcile.WithWorkers(cmp.Or(p.workers, def)) }
	wrap := func(name string, r reconcile.Reconciler[string]) reconcile.Reconciler[string] {
		if p.wrap == nil {
			return r
		}
		return p.wrap(name, r)
	}
	// Both controllers act outside the store on what they read (start a
	// process, create a pod counted in the cache): the head barrier keeps
	// a new leader or a restarted process from acting before its caches
	// hold its predecessor's last writes (on etcd, with a short
	// --experimental-watch-progress-notify-interval; see WithHeadBarrier).
	options := func(own ...reconcile.Option) []reconcile.Option {
		own = append(own, reconcile.WithLogger(logger))
		if !p.withoutHeadBarrier {
			own = append(own, reconcile.WithHeadBarrier())
		}
		return append(own, opts...)
	}

	// The ReplicaSet controller: a ReplicaSet's own changes, and changes
	// to the pods it owns, reconcile the ReplicaSet (Owns also files the
	// pods under their owner, for reconcile.Owned).
	rsc := newRSController(c.rsInf, c.podInf, st, cfg.node)
	rsc.suffix, rsc.events = p.suffix, p.rsEvents
	c.rs, err = reconcile.New("replicaset", wrap("replicaset", rsc), options(
		reconcile.For(c.rsInf),
		reconcile.Owns(c.podInf, podOwner),
		workers(2))...)
	if err != nil {
		return nil, err
	}

	// The node agent: its node's pods, except for changes to their status
	// (which it writes itself), and the exits of their processes.
	c.ag = newAgent(cfg.node, c.podInf, st.pods, crashBackOff{Base: cfg.backoffBase, Cap: cfg.backoffCap}, p.runner)
	c.ag.events = p.agentEvents
	onNode := func(ch reconcile.Change[string, Pod]) bool {
		return ch.New.Spec.Node == cfg.node || ch.Old.Spec.Node == cfg.node
	}
	specChanged := reconcile.IgnoreUnchanged[string](func(a, b Pod) bool { return sameJSON(a.Spec, b.Spec) })
	c.agent, err = reconcile.New("node-agent", wrap("node-agent", c.ag), options(
		reconcile.For(c.podInf, onNode, specChanged),
		reconcile.FromChannel("process-exits", c.ag.exits),
		workers(4))...)
	if err != nil {
		return nil, err
	}
	return c, nil
}
