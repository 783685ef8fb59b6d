// Package agent is the cluster example's node agent, a small kubelet: one
// per node, each a separate OS process. It registers its Node, renews the
// node's Lease, runs the containers of the pods bound to its node as child
// processes (restarting them per the pod's restartPolicy, with kubelet's
// crash back-off), writes their pods' status, and stops the processes of a
// pod that was deleted or bound elsewhere. Its children die with it, even
// by SIGKILL (a parent-death signal): an agent killed is a node lost.
package agent

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/reconcile"
)

// PodEnv names the environment variable that tells a container's process
// its pod ("namespace/name").
const PodEnv = "CLUSTER_POD"

// SelfCommand is the first word of a container command that runs the
// cluster binary itself, as in ["cluster", "worker", "--crash-after", "1s"].
const SelfCommand = "cluster"

// EventSource is the component name of the agent's events, as kubelet's.
const EventSource = "kubelet"

// Config configures an agent.
type Config struct {
	// Node is the node's name. Required.
	Node string
	// CPU and Memory are the node's capacity, as quantities ("4",
	// "8Gi"); MaxPods its pod capacity. Defaults: 4, 8Gi, 110.
	CPU, Memory api.Quantity
	MaxPods     int
	// Stores are the control plane's stores (apiserver.NewStores).
	// Required.
	Stores api.Stores
	// Timings: the lease renewal interval and duration, the crash
	// back-off. Default: api.FastTimings().
	Timings *api.Timings
	// LogDir is where the containers' output goes, a file per container
	// (LogPath). Default: LogDir().
	LogDir string
	// FakeContainers runs no process: each container "runs" until the
	// agent stops it, with a pid no real process has, and no output. For
	// a large cluster on one machine. Readiness probes still run. Default:
	// real processes.
	FakeContainers bool
	// Clock. Default: the real clock.
	Clock clock.WithTicker
	// Logger. Default: none.
	Logger *slog.Logger
}

// LogDir returns the default directory of the containers' output: the
// environment's CLUSTER_LOG_DIR, or cluster-logs in the temporary
// directory.
func LogDir() string {
	return cmp.Or(os.Getenv("CLUSTER_LOG_DIR"), filepath.Join(os.TempDir(), "cluster-logs"))
}

// LogPath returns the file of a container's output (appended to across
// restarts) under dir, as kubelet keeps /var/log/pods/NS_NAME_UID/.
func LogPath(dir string, p *api.Pod, container string) string {
	return filepath.Join(dir, p.Spec.NodeName, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container+".log")
}

// Run runs the agent until ctx is done, then stops its processes (SIGTERM,
// then SIGKILL after their grace) and returns. It fails at once on a bad
// Config, and with the Manager's error otherwise.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Node == "" {
		return errors.New("agent: a node name is required")
	}
	if cfg.Stores.Pods == nil || cfg.Stores.Nodes == nil || cfg.Stores.Leases == nil || cfg.Stores.Events == nil {
		return errors.New("agent: the stores of pods, nodes, leases and events are required")
	}
	cfg.CPU = cmp.Or(cfg.CPU, "4")
	cfg.Memory = cmp.Or(cfg.Memory, "8Gi")
	cfg.MaxPods = cmp.Or(cfg.MaxPods, 110)
	for _, q := range []api.Quantity{cfg.CPU, cfg.Memory} {
		if _, err := q.Milli(); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	if cfg.Timings == nil {
		t := api.FastTimings()
		cfg.Timings = &t
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.LogDir = cmp.Or(cfg.LogDir, LogDir())

	sink, err := events.NewStoreSink(cfg.Stores.Events, events.WithPrefix(EventPrefix(cfg.Node)))
	if err != nil {
		return err
	}
	rec, err := events.NewRecorder(EventSource, events.WithSink(sink), events.WithClock(cfg.Clock))
	if err != nil {
		return err
	}
	podInf, err := informer.New[string, api.Pod]("pods", nodePods{src: cfg.Stores.Pods, node: cfg.Node},
		informer.WithLogger(cfg.Logger), informer.WithClock(cfg.Clock))
	if err != nil {
		return err
	}
	k := newKubelet(cfg, podInf, rec)
	ctrl, err := reconcile.New("kubelet", k,
		reconcile.For(podInf, func(ch reconcile.Change[string, api.Pod]) bool {
			return ch.New.Spec.NodeName == cfg.Node || ch.Old.Spec.NodeName == cfg.Node
		}),
		reconcile.FromChannel("containers", k.wake),
		reconcile.WithWorkers(4), reconcile.WithLogger(cfg.Logger), reconcile.WithShutdownGrace(5*time.Second))
	if err != nil {
		return err
	}
	mgr, err := reconcile.NewManager(reconcile.ManagerOptions{Logger: cfg.Logger, ShutdownTimeout: 45 * time.Second})
	if err != nil {
		return err
	}
	for _, err := range []error{
		mgr.AddController(ctrl),
		mgr.AddFunc("node", func(ctx context.Context) error { return k.heartbeat(ctx) }),
		mgr.AddFunc("processes", func(ctx context.Context) error { <-ctx.Done(); k.shutdown(); return nil }),
		mgr.AddFunc("events", func(ctx context.Context) error {
			_ = sink.Run(ctx)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = sink.Flush(fctx)
			return nil
		}),
	} {
		if err != nil {
			return err
		}
	}
	err = mgr.Run(ctx)
	k.shutdown()
	return err
}

// EventPrefix is where node's agent stores its events: a prefix of its own,
// so that its event sink's retention prunes only its records.
func EventPrefix(node string) string { return "events/node/" + node + "/" }

// Main is the agent's command line: `cluster agent --node n1 --cpu 4
// --memory 8Gi --api http://127.0.0.1:6443 --token T`. It runs until
// SIGINT or SIGTERM and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	var cfg Config
	var apiURL, token, timings, level string
	var cpu, memory string
	fl := flag.NewFlagSet("agent", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&cfg.Node, "node", "", "the node's name (required)")
	fl.StringVar(&cpu, "cpu", "4", "the node's CPUs, a quantity")
	fl.StringVar(&memory, "memory", "8Gi", "the node's memory, a quantity")
	fl.IntVar(&cfg.MaxPods, "pods", 110, "how many pods the node takes")
	fl.StringVar(&apiURL, "api", cmp.Or(os.Getenv("CLUSTER_API"), "http://127.0.0.1:6443"), "the control plane's URL (default $CLUSTER_API)")
	fl.StringVar(&token, "token", os.Getenv("CLUSTER_TOKEN"), "bearer token (default $CLUSTER_TOKEN)")
	fl.StringVar(&timings, "timings", "fast", "fast or kube: the lease renewal and crash back-off (as up's)")
	fl.StringVar(&cfg.LogDir, "log-dir", LogDir(), "where the containers' output goes")
	fl.BoolVar(&cfg.FakeContainers, "fake-containers", false, "run no process: containers run until stopped, for a large cluster on one machine")
	fl.StringVar(&level, "log-level", "info", "logs on stderr: debug, info, warn, error or none")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	cfg.CPU, cfg.Memory = api.Quantity(cpu), api.Quantity(memory)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "cluster agent: %v\n", err)
		return 1
	}
	switch timings {
	case "fast":
		t := api.FastTimings()
		cfg.Timings = &t
	case "kube":
		t := api.KubeTimings()
		cfg.Timings = &t
	default:
		return fail(fmt.Errorf("--timings %q: want fast or kube", timings))
	}
	if level != "none" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return fail(fmt.Errorf("--log-level %q: want debug, info, warn, error or none", level))
		}
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l}))
	}
	st, err := apiserver.NewNodeStores(apiURL, token, cfg.Node, httpstore.ClientOptions{})
	if err != nil {
		return fail(err)
	}
	cfg.Stores = st
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "cluster agent: node %s (pid %d) on %s\n", cfg.Node, os.Getpid(), apiURL)
	if err := Run(ctx, cfg); err != nil {
		return fail(err)
	}
	return 0
}
