// Command kubecmp measures the same ConfigMap controller written with
// controller-runtime (its defaults) and with converge's Kubernetes backend
// (package kube), on one real kube-apiserver, one run at a time.
//
// Each run gets a fresh namespace with N ConfigMaps (data.v = "0"), then a
// child process (this binary again) builds one implementation's controller
// and measures:
//
//   - sync: from building the controller to its cache synced;
//   - once: from building it to every object reconciled once (the
//     reconciler copies data.v into an annotation with one write);
//   - heap/object: heap after GC with the controller running and every
//     object reconciled, minus the heap after GC before it was built,
//     divided by N;
//   - requests/reconcile: the server's own apiserver_request_total of
//     configmaps during each phase (the steady writer's PATCHes left out)
//     divided by the reconcile writes;
//   - write → reconcile latency p50/p99: a writer PATCHes data.v of one
//     object after another at -rate per second for -steady; the latency
//     runs from before the PATCH to the end of the reconciler's write of
//     that value.
//
// The implementations take turns in each repetition, the order rotating
// from one repetition to the next. The table gives the median [min..max]
// of the repetitions and the ratios converge ÷ controller-runtime.
//
// Usage (a server from scripts/servers.sh, see docs/design/kube.md):
//
//	export CONVERGE_SERVERS_DIR=/tmp/cs-kube CONVERGE_SERVERS_KINDS=kube
//	bash scripts/servers.sh start && eval "$(bash scripts/servers.sh env)"
//	go -C bench run ./kubecmp -objects 1000,10000 -reps 3
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// profileEnv names a directory: each child writes its CPU profile there
// (<impl>-<objects>.cpu.pprof, the last repetition's), and its heap
// profile once every object is reconciled (<impl>-<objects>.heap.pprof).
const profileEnv = "KUBECMP_CPUPROFILE"

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
	impls := flag.String("impl", strings.Join(implementations, ","), "comma-separated implementations")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each implementation per object count")
	flag.Float64Var(&o.rate, "rate", 20, "steady phase: writes per second")
	flag.DurationVar(&o.steady, "steady", 10*time.Second, "steady phase: how long to write (0: no steady phase)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of one run")
	flag.Parse()
	var err error
	if o.objects, err = parseInts(*objects); err == nil {
		o.impls = strings.Split(*impls, ",")
		err = measure(ctx, o, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubecmp:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig string
	objects    []int
	impls      []string
	reps       int
	rate       float64
	steady     time.Duration
	timeout    time.Duration
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-objects: %q is not a positive count", f)
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
	for _, impl := range o.impls {
		if _, err := runnerOf(impl); err != nil {
			return err
		}
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	all := map[int]map[string][]result{}
	for _, n := range o.objects {
		all[n] = map[string][]result{}
		for rep := range o.reps {
			for i := range o.impls {
				impl := o.impls[(i+rep)%len(o.impls)]
				r, err := runOnce(ctx, cfg, o, impl, n, log)
				if err != nil {
					return err
				}
				fmt.Fprintf(log, "kubecmp: n=%d rep=%d %s: sync %.2fs once %.2fs cpu/obj %.0fµs heap/obj %.0f B req/rec %.2f/%.2f p50 %.1fms p99 %.1fms (%d samples, %d missed)\n",
					n, rep+1, impl, r.SyncSeconds, r.OnceSeconds, r.OnceCPUPerObject, r.HeapPerObject, r.OnceRequests, r.SteadyRequests, r.LatencyP50, r.LatencyP99, r.Samples, r.Missed)
				all[n][impl] = append(all[n][impl], r)
			}
		}
	}
	printTable(out, o, all)
	return nil
}

// runOnce prepares a namespace, runs one child on it and cleans up.
func runOnce(ctx context.Context, cfg *rest.Config, o options, impl string, n int, log io.Writer) (result, error) {
	ns, err := prepare(ctx, cfg, n)
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := cleanUp(context.WithoutCancel(ctx), cfg, ns); err != nil {
			fmt.Fprintln(log, "kubecmp: clean-up:", err)
		}
	}()
	arg, _ := json.Marshal(childArgs{Impl: impl, NS: ns, Objects: n, Rate: o.rate, Steady: o.steady, Timeout: o.timeout})
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(arg), "CONVERGE_KUBECONFIG="+o.kubeconfig)
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

func writeHeapProfile(a childArgs) error {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.heap.pprof", a.Impl, a.Objects)))
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
	if dir := os.Getenv(profileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.cpu.pprof", a.Impl, a.Objects)))
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
