// Command cluster is a small Kubernetes on a laptop, built on converge: a
// control plane whose controllers (deployment, replicaset, scheduler, node
// lifecycle, garbage collector) share one reconcile.Manager, node agents
// that run pods as real processes, each agent a separate OS process, and a
// kubectl-like CLI.
//
//	cluster up [--store mem|etcd://…|postgres://…|sqlite://FILE] [--timings fast|kube] [--listen ADDR]
//	cluster agent --node n1 --cpu 4 --memory 8Gi [--api http://127.0.0.1:6443] [--token T]
//	cluster ctl apply -f web.yaml
//	cluster ctl get deploy,rs,pods,nodes [-o wide|yaml|json] [-w]
//	cluster ctl describe deploy/web
//	cluster demo [--timings fast|kube] [--report FILE]      # the scripted scene, as a timeline
//	cluster measure [--nodes 50] [--pods 1000]             # the control plane's memory, goroutines and writes under load
//	cluster worker [--crash-after 1s] [--exit-code 3]      # what pods run by default
//
// The control plane serves Kubernetes-shaped paths (package apiserver) and
// converge's store protocol, which the agents and the CLI use.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/ctl"
	osproc "github.com/converge-go/converge/examples/internal/proc"
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = "usage: cluster up|agent|ctl|demo|measure|worker [flags]; cluster ctl --help for the CLI's verbs"

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	mode, args := args[0], args[1:]
	switch mode {
	case "up":
		return upMode(args, stdout, stderr)
	case "agent":
		return agent.Main(args, stdout, stderr)
	case "ctl":
		return ctl.Main(args, stdout, stderr)
	case "demo":
		return demoMode(args, stdout, stderr)
	case "measure":
		return measureMode(args, stdout, stderr)
	case "worker":
		return osproc.Worker(args, agent.PodEnv)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "cluster: unknown mode %q\n%s\n", mode, usage)
	return 2
}

// newLogger returns a text logger at level on w, or a silent one for "none".
func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	if level == "none" {
		return slog.New(slog.DiscardHandler), nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn, error or none", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
