// Command kubecmp measures the same controller written with
// controller-runtime (its defaults) and with converge's Kubernetes backend
// (package kube), on one real kube-apiserver, one run at a time.
//
// Each run gets a fresh namespace with N objects of -resource (their
// value "0"), then a child process (this binary again) builds one
// implementation's controller and measures:
//
//   - sync: from building the controller to its cache synced;
//   - once: from building it to every object reconciled once (the
//     reconciler copies the value with one write: into an annotation, or
//     into the status of the custom resource);
//   - heap/object: heap after GC with the controller running and every
//     object reconciled, minus the heap after GC before it was built,
//     divided by N;
//   - requests/reconcile: the server's own apiserver_request_total of
//     the resource during each phase (the steady writer's PATCHes left
//     out) divided by the reconciles that wrote;
//   - write → reconcile latency p50/p99: a writer PATCHes the value of one
//     object after another at -rate per second for -steady; the latency
//     runs from before the PATCH to the end of the reconciler's write of
//     that value.
//
// The resources (-resource): configmaps (controller-runtime reads them as
// protobuf, converge as JSON); crd, a custom resource with a status
// subresource whose reconciler writes the status (both read JSON); and
// crd-annotation, the same custom resource whose reconciler writes an
// annotation as over ConfigMaps. -workers runs both libraries with the
// same number of concurrent reconciles, one table section each.
//
// The implementations take turns in each repetition, the order rotating
// from one repetition to the next. The table gives the median [min..max]
// of the repetitions and the ratios converge ÷ controller-runtime.
//
// With -failover, kubecmp measures leader fail-over instead: per lease
// timing, a chain of candidate processes per library in a namespace of
// its own, each electing over a Lease (converge: kube.Lock under a
// reconcile.Manager; controller-runtime: its leader election). Each
// fail-over starts a standby, waits until its cache has synced and a
// random time more, SIGKILLs the leader and times the kill to the
// standby's first reconcile.
//
// Usage (a server from scripts/servers.sh, see docs/design/kube.md):
//
//	export CONVERGE_SERVERS_DIR=/tmp/cs-kube CONVERGE_SERVERS_KINDS=kube
//	bash scripts/servers.sh start && eval "$(bash scripts/servers.sh env)"
//	go -C bench run ./kubecmp -objects 1000,10000 -reps 3
//	go -C bench run ./kubecmp -resource crd -objects 1000,10000 -reps 3
//	go -C bench run ./kubecmp -objects 10000 -workers 1,4,8 -steady 0
//	go -C bench run ./kubecmp -failover default,short -reps 5
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// profileEnv names a directory: each child writes its CPU profile there
// (<impl>-<resource>-<objects>-w<workers>.cpu.pprof, the last
// repetition's), and its heap profile once every object is reconciled
// (….heap.pprof).
const profileEnv = "KUBECMP_CPUPROFILE"

func profileName(a childArgs, kind string) string {
	return fmt.Sprintf("%s-%s-%d-w%d.%s.pprof", a.Impl, a.Resource, a.Objects, a.Workers, kind)
}

// childEnv carries a child's arguments, as JSON, from the parent.
const childEnv = "KUBECMP_CHILD"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if arg := os.Getenv(childEnv); arg != "" {
		if err := child(ctx, arg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "kubecmp child:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	// Not a -kubeconfig flag: controller-runtime's config package
	// registers one on the default flag set.
	o.kubeconfig = os.Getenv("CONVERGE_KUBECONFIG")
	objects := flag.String("objects", "1000,10000", "comma-separated object counts, one table section each")
	impls := flag.String("impl", "", "comma-separated implementations (default: every one the resource and mode allow)")
	workers := flag.String("workers", "0", "comma-separated worker counts, one table section each, the same for both libraries (0: each library's default, 1)")
	failover := flag.String("failover", "", "measure leader fail-over after SIGKILL instead, with these lease timings (comma-separated: "+strings.Join(slices.Sorted(maps.Keys(leaseTimings)), ", ")+")")
	flag.StringVar(&o.resource, "resource", resourceConfigMaps, "the objects: "+strings.Join(resources, " or "))
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each implementation per object count (fail-over: fail-overs per implementation and timing)")
	flag.Float64Var(&o.rate, "rate", 20, "steady phase: writes per second")
	flag.DurationVar(&o.steady, "steady", 10*time.Second, "steady phase: how long to write (0: no steady phase)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of one run")
	flag.Parse()
	var err error
	o.objects, err = parseInts("-objects", *objects, 1)
	if err == nil {
		o.workers, err = parseInts("-workers", *workers, 0)
	}
	if err == nil && *failover != "" {
		o.failover = strings.Split(*failover, ",")
	}
	if err == nil {
		o.impls = defaultImpls(o)
		if *impls != "" {
			o.impls = strings.Split(*impls, ",")
		}
		if o.failover != nil {
			err = measureFailover(ctx, o, os.Stdout, os.Stderr)
		} else {
			err = measure(ctx, o, os.Stdout, os.Stderr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubecmp:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig string
	resource   string
	objects    []int
	workers    []int
	impls      []string
	failover   []string // lease timings (leaseTimings) to measure fail-over with; nil: no fail-over
	reps       int
	rate       float64
	steady     time.Duration
	timeout    time.Duration
}

// defaultImpls returns every implementation that runs over o.resource,
// and for a fail-over the two libraries only (converge-slim elects as
// converge does).
func defaultImpls(o options) []string {
	if o.failover != nil || isCRD(o.resource) {
		return []string{implControllerRuntime, implConverge}
	}
	return implementations
}

func parseInts(name, s string, least int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			return nil, fmt.Errorf("%s: %q is not a count of at least %d", name, f, least)
		}
		out = append(out, n)
	}
	return out, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return nil, errors.New("no kubeconfig: set CONVERGE_KUBECONFIG (scripts/servers.sh env)")
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// measure runs every repetition and prints the table to out, progress to
// log.
func measure(ctx context.Context, o options, out, log io.Writer) error {
	cfg, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	all := map[section]map[string][]result{}
	for _, n := range o.objects {
		for _, w := range o.workers {
			sec := section{n, w}
			all[sec] = map[string][]result{}
			for rep := range o.reps {
				for i := range o.impls {
					impl := o.impls[(i+rep)%len(o.impls)]
					r, err := runOnce(ctx, cfg, o, impl, sec, log)
					if err != nil {
						return err
					}
					fmt.Fprintf(log, "kubecmp: %s n=%d workers=%d rep=%d %s: sync %.2fs once %.2fs cpu/obj %.0fµs heap/obj %.0f B server PUT %.2fms share %.2f req/rec %.2f/%.2f p50 %.1fms p99 %.1fms (%d samples, %d missed)\n",
						o.resource, n, w, rep+1, impl, r.SyncSeconds, r.OnceSeconds, r.OnceCPUPerObject, r.HeapPerObject, r.ServerPutMs, r.ServerPutShare, r.OnceRequests, r.SteadyRequests, r.LatencyP50, r.LatencyP99, r.Samples, r.Missed)
					all[sec][impl] = append(all[sec][impl], r)
				}
			}
		}
	}
	printTable(out, o, all)
	return nil
}

// section is one table section: the objects and the workers of each
// library.
type section struct{ objects, workers int }

// setUp checks o's implementations and resource, and returns the server's
// config once the resource is served.
func setUp(ctx context.Context, o options) (*rest.Config, error) {
	for _, impl := range o.impls {
		if _, err := runnerOf(impl, o.resource); err != nil {
			return nil, err
		}
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	if isCRD(o.resource) {
		if err := ensureCRD(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// runOnce prepares a namespace, runs one child on it and cleans up.
func runOnce(ctx context.Context, cfg *rest.Config, o options, impl string, sec section, log io.Writer) (result, error) {
	n := sec.objects
	ns, err := prepare(ctx, cfg, o.resource, n)
	if ns != "" {
		defer func() {
			if err := cleanUp(context.WithoutCancel(ctx), cfg, o.resource, ns); err != nil {
				fmt.Fprintln(log, "kubecmp: clean-up:", err)
			}
		}()
	}
	if err != nil {
		return result{}, err
	}
	cmd, err := childCommand(ctx, o, childArgs{Impl: impl, NS: ns, Resource: o.resource, Objects: n, Workers: sec.workers, Rate: o.rate, Steady: o.steady, Timeout: o.timeout})
	if err != nil {
		return result{}, err
	}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, log
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s on %d objects: %w", impl, n, err)
	}
	var r result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return result{}, fmt.Errorf("%s on %d objects: its output %q: %w", impl, n, stdout.String(), err)
	}
	return r, nil
}

// childCommand returns the command that runs this binary as a child with
// a.
func childCommand(ctx context.Context, o options, a childArgs) (*exec.Cmd, error) {
	arg, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(arg), "CONVERGE_KUBECONFIG="+o.kubeconfig)
	return cmd, nil
}

func writeHeapProfile(a childArgs) error {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, profileName(a, "heap")))
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

// child runs in the child process: one measurement, printed as JSON.
func child(ctx context.Context, arg string, out io.Writer) error {
	var a childArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		return fmt.Errorf("%s: %w", childEnv, err)
	}
	cfg, err := restConfig(os.Getenv("CONVERGE_KUBECONFIG"))
	if err != nil {
		return err
	}
	if a.Candidate != nil {
		return runCandidate(ctx, cfg, a, out)
	}
	if dir := os.Getenv(profileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, profileName(a, "cpu")))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := runChild(ctx, cfg, a)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}
