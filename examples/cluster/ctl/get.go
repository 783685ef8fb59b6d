package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// get prints objects as kubectl get does: a table per kind (-o wide adds
// columns), or the objects as YAML or JSON; -w then prints a row per
// change until interrupted.
func (c *cli) get(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("get", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	output := fl.String("o", "", "wide, yaml or json")
	watch := fl.Bool("w", false, "watch for changes")
	all := fl.Bool("A", false, "every namespace")
	var positional []string
	for rest := args; ; {
		if err := fl.Parse(rest); err != nil {
			return err
		}
		if fl.NArg() == 0 {
			break
		}
		positional, rest = append(positional, fl.Arg(0)), fl.Args()[1:]
	}
	switch *output {
	case "", "wide", "yaml", "json":
	default:
		return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,wide,yaml", *output)
	}
	if len(positional) == 0 {
		return errors.New("you must specify the type of resource to get. Use \"cluster ctl get deploy,rs,pods,nodes\"")
	}
	var ks []*kind
	name := ""
	if k, n, ok := strings.Cut(positional[0], "/"); ok {
		kd, err := lookupKind(k)
		if err != nil {
			return err
		}
		ks, name = []*kind{kd}, n
	} else {
		for _, s := range strings.Split(positional[0], ",") {
			kd, err := lookupKind(s)
			if err != nil {
				return err
			}
			ks = append(ks, kd)
		}
	}
	if len(positional) > 1 {
		name = positional[1]
	}
	prefix := len(ks) > 1
	revs := make([]informer.Revision, len(ks))
	var docs []any
	for i, k := range ks {
		objs, rev, err := c.list(ctx, k)
		if err != nil {
			return err
		}
		revs[i] = rev
		objs = c.filter(k, objs, name, *all)
		if name != "" && len(objs) == 0 {
			return notFoundError{k, name}
		}
		if *output == "yaml" || *output == "json" {
			for _, o := range objs {
				docs = append(docs, render(k, o))
			}
			continue
		}
		if len(objs) == 0 {
			if !prefix && !*watch {
				fmt.Fprintf(c.stderr, "No resources found in %s namespace.\n", c.namespace)
			}
			continue
		}
		if i > 0 && prefix {
			fmt.Fprintln(c.stdout)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header(k, *output == "wide", *all), "\t"))
		for _, o := range objs {
			fmt.Fprintln(tw, strings.Join(row(k, o, *output == "wide", *all, prefix), "\t"))
		}
		_ = tw.Flush()
	}
	if docs != nil || *output == "yaml" || *output == "json" {
		if err := printDocs(c.stdout, *output, docs, name != ""); err != nil {
			return err
		}
	}
	if !*watch {
		return nil
	}
	return c.watch(ctx, ks, revs, name, *output == "wide", *all, prefix)
}

// filter keeps the objects of the CLI's namespace (all: every one) and,
// if name is set, that one.
func (c *cli) filter(k *kind, objs []item, name string, all bool) []item {
	out := objs[:0]
	for _, o := range objs {
		m := o.meta()
		if (k.namespaced && !all && m.Namespace != c.namespace) || (name != "" && m.Name != name) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// watch prints a row for every change of the kinds after their listed
// revisions, until ctx is done.
func (c *cli) watch(ctx context.Context, ks []*kind, revs []informer.Revision, name string, wide, all, prefix bool) error {
	var mu sync.Mutex
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 3, ' ', 0)
	emit := func(k *kind, o item) {
		if len(c.filter(k, []item{o}, name, all)) == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(tw, strings.Join(row(k, o, wide, all, prefix), "\t"))
		_ = tw.Flush()
	}
	errc := make(chan error, len(ks))
	for i, k := range ks {
		go func() { errc <- c.watchKind(ctx, k, revs[i], func(o item) { emit(k, o) }) }()
	}
	var first error
	for range ks {
		if err := <-errc; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	return first
}

func (c *cli) watchKind(ctx context.Context, k *kind, after informer.Revision, emit func(item)) error {
	switch k.name {
	case api.KindDeployment:
		return watchOf(ctx, c.st.Deployments, after, emit)
	case api.KindReplicaSet:
		return watchOf(ctx, c.st.ReplicaSets, after, emit)
	case api.KindPod:
		return watchOf(ctx, c.st.Pods, after, emit)
	case api.KindNode:
		return watchOf(ctx, c.st.Nodes, after, emit)
	}
	return watchOf(ctx, c.st.Leases, after, emit)
}

// watchOf watches st after revision after, resuming after the last
// revision seen when the stream breaks, until ctx is done.
func watchOf[V any](ctx context.Context, st informer.Store[string, V], after informer.Revision, emit func(item)) error {
	for ctx.Err() == nil {
		err := st.Watch(ctx, after, func(ev informer.Event[string, V]) error {
			after = max(after, ev.Revision)
			if ev.Type == informer.Put && ev.Err == nil {
				v := ev.Value
				emit(item{v: &v, rev: ev.Revision})
			}
			return nil
		})
		if errors.Is(err, informer.ErrRevisionExpired) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// render returns o as the API shows it, with kind and apiVersion.
func render(k *kind, o item) map[string]any {
	b, _ := json.Marshal(o.v)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	out["apiVersion"], out["kind"] = api.APIVersions[k.name], k.name
	if md, ok := out["metadata"].(map[string]any); ok {
		md["resourceVersion"] = strconv.FormatUint(uint64(o.rev), 10)
	}
	return out
}

// printDocs prints one object, or a List of them, as YAML or JSON.
func printDocs(w io.Writer, format string, docs []any, single bool) error {
	var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": docs}
	if single && len(docs) == 1 {
		v = docs[0]
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(v)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

func header(k *kind, wide, all bool) []string {
	var h []string
	if all && k.namespaced {
		h = append(h, "NAMESPACE")
	}
	switch k.name {
	case api.KindDeployment:
		h = append(h, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
		if wide {
			h = append(h, "CONTAINERS", "COMMAND", "SELECTOR")
		}
	case api.KindReplicaSet:
		h = append(h, "NAME", "DESIRED", "CURRENT", "READY", "AGE")
		if wide {
			h = append(h, "CONTAINERS", "COMMAND", "SELECTOR")
		}
	case api.KindPod:
		h = append(h, "NAME", "READY", "STATUS", "RESTARTS", "AGE")
		if wide {
			h = append(h, "PID", "NODE")
		}
	case api.KindNode:
		h = append(h, "NAME", "STATUS", "AGE", "CPU", "MEMORY")
		if wide {
			h = append(h, "TAINTS")
		}
	default:
		h = append(h, "NAME", "HOLDER", "AGE")
	}
	return h
}

func row(k *kind, o item, wide, all, prefix bool) []string {
	m := o.meta()
	name := m.Name
	if prefix {
		name = k.ref(name)
	}
	var r []string
	if all && k.namespaced {
		r = append(r, m.Namespace)
	}
	age := Age(m.CreationTimestamp)
	switch v := o.v.(type) {
	case *api.Deployment:
		want := api.Replicas(v.Spec.Replicas)
		r = append(r, name, fmt.Sprintf("%d/%d", v.Status.ReadyReplicas, want), itoa(v.Status.UpdatedReplicas), itoa(v.Status.AvailableReplicas), age)
		if wide {
			r = append(r, templateColumns(v.Spec.Template, v.Spec.Selector)...)
		}
	case *api.ReplicaSet:
		r = append(r, name, itoa(api.Replicas(v.Spec.Replicas)), itoa(v.Status.Replicas), itoa(v.Status.ReadyReplicas), age)
		if wide {
			r = append(r, templateColumns(v.Spec.Template, v.Spec.Selector)...)
		}
	case *api.Pod:
		cols := printPod(v)
		r = append(r, name, cols.ready, cols.status, cols.restarts, age)
		if wide {
			pid := "<none>"
			for _, s := range v.Status.ContainerStatuses {
				if s.PID != 0 {
					pid = strconv.Itoa(s.PID)
					break
				}
			}
			r = append(r, pid, orNone(v.Spec.NodeName))
		}
	case *api.Node:
		r = append(r, name, NodeStatus(v), age, string(v.Status.Capacity[api.ResourceCPU]), string(v.Status.Capacity[api.ResourceMemory]))
		if wide {
			var ts []string
			for _, t := range v.Spec.Taints {
				ts = append(ts, t.Key+":"+t.Effect)
			}
			r = append(r, orNone(strings.Join(ts, ",")))
		}
	case *api.Lease:
		r = append(r, name, v.Spec.HolderIdentity, age)
	}
	return r
}

func templateColumns(t api.PodTemplateSpec, sel api.LabelSelector) []string {
	var names, cmds []string
	for _, c := range t.Spec.Containers {
		names = append(names, c.Name)
		cmds = append(cmds, strings.Join(c.Command, " "))
	}
	var s []string
	for k, v := range sel.MatchLabels {
		s = append(s, k+"="+v)
	}
	return []string{strings.Join(names, ","), strings.Join(cmds, ","), strings.Join(s, ",")}
}

// NodeStatus is kubectl get's STATUS of a node: Ready, NotReady or
// Unknown, and SchedulingDisabled when cordoned.
func NodeStatus(n *api.Node) string {
	s := "Unknown"
	if c, ok := object.FindCondition(n.Status.Conditions, api.NodeReady); ok {
		switch c.Status {
		case object.ConditionTrue:
			s = "Ready"
		case object.ConditionFalse:
			s = "NotReady"
		default:
			s = "NotReady"
		}
	}
	if n.Spec.Unschedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

// Age says how long ago t was, as kubectl does: 45s, 5m30s, 3h, 2d.
func Age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return HumanDuration(time.Since(t))
}

// HumanDuration is kubectl's duration.HumanDuration, roughly.
func HumanDuration(d time.Duration) string {
	switch s := int(d.Round(time.Second) / time.Second); {
	case s < 0:
		return "0s"
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case d < 10*time.Minute:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", s/60)
	case d < 8*time.Hour:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", s/3600)
	case d < 8*24*time.Hour:
		return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
