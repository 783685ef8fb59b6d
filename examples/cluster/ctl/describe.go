package ctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// describe prints an object as kubectl describe does, with its events.
func (c *cli) describe(ctx context.Context, args []string) error {
	k, name, _, err := kindAndName(args)
	if err != nil {
		return err
	}
	o, err := c.getObject(ctx, k, name)
	if err != nil {
		return err
	}
	evs, err := c.eventsOf(ctx, k, o.meta())
	if err != nil {
		return err
	}
	var rel Related
	switch v := o.v.(type) {
	case *api.Deployment:
		if _, rel.ReplicaSets, err = c.history(ctx, v.Key(), v.Name); err != nil {
			return err
		}
	case *api.Node:
		entries, _, err := c.st.Pods.List(ctx)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Err == nil && e.Value.Spec.NodeName == v.Name {
				rel.Pods = append(rel.Pods, e.Value)
			}
		}
		slices.SortFunc(rel.Pods, func(a, b api.Pod) int { return strings.Compare(a.Key(), b.Key()) })
	}
	Describe(c.stdout, o.v, rel, evs, time.Now())
	return nil
}

// Related are the objects describe shows with one: a Deployment's
// ReplicaSets (by revision: the last is the new one), a Node's pods.
type Related struct {
	ReplicaSets []*api.ReplicaSet
	Pods        []api.Pod
}

// eventsOf returns the events recorded about an object: those whose key
// is the object's store key, or the key after the kind's plural
// ("pods/default/web-x"), oldest first.
func (c *cli) eventsOf(ctx context.Context, k *kind, m *api.Metadata) ([]events.Event, error) {
	entries, _, err := c.st.Events.List(ctx)
	if err != nil {
		return nil, err
	}
	key := m.Key()
	var out []events.Event
	for _, e := range entries {
		if e.Err == nil && (e.Value.Key == key || e.Value.Key == k.plural+"/"+key) {
			out = append(out, e.Value)
		}
	}
	slices.SortFunc(out, func(a, b events.Event) int { return a.Last.Compare(b.Last) })
	return out, nil
}

// Describe writes obj (one of the kinds), the objects related to it and its
// events as kubectl describe does, with ages counted back from now.
func Describe(w io.Writer, obj any, rel Related, evs []events.Event, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	m := api.MetaOf(obj)
	line := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	line("Name", "%s", m.Name)
	if m.Namespace != "" {
		line("Namespace", "%s", m.Namespace)
	}
	line("Labels", "%s", labels(m.Labels))
	line("Annotations", "%s", labels(m.Annotations))
	line("CreationTimestamp", "%s", m.CreationTimestamp.Format(time.RFC1123Z))
	if m.Deleting() {
		line("Deletion Requested", "%s", m.DeletionRequested.Format(time.RFC1123Z))
	}
	if len(m.Finalizers) > 0 {
		line("Finalizers", "%v", m.Finalizers)
	}
	if r, ok := api.ControllerOf(*m); ok {
		line("Controlled By", "%s/%s", r.Kind, r.Name)
	}
	switch v := obj.(type) {
	case *api.Deployment:
		line("Selector", "%s", labels(v.Spec.Selector.MatchLabels))
		line("Replicas", "%d desired | %d updated | %d total | %d available | %d unavailable", api.Replicas(v.Spec.Replicas),
			v.Status.UpdatedReplicas, v.Status.Replicas, v.Status.AvailableReplicas, v.Status.UnavailableReplicas)
		strategy := v.Spec.Strategy.Type
		line("StrategyType", "%s", strategy)
		line("MinReadySeconds", "%d", v.Spec.MinReadySeconds)
		if ru := v.Spec.Strategy.RollingUpdate; ru != nil {
			line("RollingUpdateStrategy", "%s max unavailable, %s max surge", ru.MaxUnavailable, ru.MaxSurge)
		}
		if v.Spec.Paused {
			line("Paused", "true")
		}
		template(tw, v.Spec.Template)
		conditions(tw, v.Status.Conditions)
		var old []string
		for i, rs := range rel.ReplicaSets {
			s := fmt.Sprintf("%s (%d/%d replicas created)", rs.Name, rs.Status.Replicas, api.Replicas(rs.Spec.Replicas))
			if i == len(rel.ReplicaSets)-1 {
				line("NewReplicaSet", "%s", s)
			} else if rs.Status.Replicas > 0 || api.Replicas(rs.Spec.Replicas) > 0 {
				old = append(old, s)
			}
		}
		if len(rel.ReplicaSets) > 0 {
			line("OldReplicaSets", "%s", orNone(strings.Join(old, ", ")))
		}
	case *api.ReplicaSet:
		line("Selector", "%s", labels(v.Spec.Selector.MatchLabels))
		line("Replicas", "%d current / %d desired", v.Status.Replicas, api.Replicas(v.Spec.Replicas))
		line("Pods Status", "%d Ready / %d Available", v.Status.ReadyReplicas, v.Status.AvailableReplicas)
		template(tw, v.Spec.Template)
		conditions(tw, v.Status.Conditions)
	case *api.Pod:
		line("Node", "%s", orNone(v.Spec.NodeName))
		if !v.Status.StartTime.IsZero() {
			line("Start Time", "%s", v.Status.StartTime.Format(time.RFC1123Z))
		}
		line("Status", "%s", PodStatus(v))
		line("Restart Policy", "%s", v.Spec.RestartPolicy)
		fmt.Fprintln(tw, "Containers:")
		for _, ct := range v.Spec.Containers {
			fmt.Fprintf(tw, "  %s:\n", ct.Name)
			fmt.Fprintf(tw, "    Command:\t%s\n", strings.Join(ct.Command, " "))
			for _, s := range v.Status.ContainerStatuses {
				if s.Name == ct.Name {
					containerState(tw, "    State", s.State)
					if s.LastState.Terminated != nil {
						containerState(tw, "    Last State", s.LastState)
					}
					fmt.Fprintf(tw, "    Ready:\t%v\n", s.Ready)
					fmt.Fprintf(tw, "    Restart Count:\t%d\n", s.RestartCount)
					if s.PID != 0 {
						fmt.Fprintf(tw, "    PID:\t%d\n", s.PID)
					}
				}
			}
			if len(ct.Resources.Requests) > 0 {
				fmt.Fprintf(tw, "    Requests:\t%s\n", quantities(ct.Resources.Requests))
			}
		}
		conditions(tw, v.Status.Conditions)
		var tols []string
		for _, t := range v.Spec.Tolerations {
			s := t.Key
			if t.Effect != "" {
				s += ":" + t.Effect
			}
			if t.TolerationSeconds != nil {
				s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
			}
			tols = append(tols, s)
		}
		line("Tolerations", "%s", orNone(strings.Join(tols, "\n             \t")))
	case *api.Node:
		var taints []string
		for _, t := range v.Spec.Taints {
			taints = append(taints, t.Key+":"+t.Effect)
		}
		line("Taints", "%s", orNone(strings.Join(taints, ", ")))
		line("Unschedulable", "%v", v.Spec.Unschedulable)
		conditions(tw, v.Status.Conditions)
		line("Capacity", "%s", quantities(v.Status.Capacity))
		line("Allocatable", "%s", quantities(v.Status.Allocatable))
		fmt.Fprintf(tw, "Non-terminated Pods:\t(%d in total)\n", len(rel.Pods))
		if len(rel.Pods) > 0 {
			fmt.Fprintln(tw, "  Namespace\tName\tStatus\tAge")
			fmt.Fprintln(tw, "  ---------\t----\t------\t---")
			for _, p := range rel.Pods {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Namespace, p.Name, PodStatus(&p), HumanDuration(now.Sub(p.CreationTimestamp)))
			}
		}
	case *api.Lease:
		line("Holder", "%s", v.Spec.HolderIdentity)
		line("Renew Time", "%s", v.Spec.RenewTime.Format(time.RFC3339Nano))
	}
	_ = tw.Flush()
	Events(w, evs, now)
}

// Events writes an object's events as kubectl describe's Events table:
// a repeated event's age is "3s (x4 over 10s)".
func Events(w io.Writer, evs []events.Event, now time.Time) {
	if len(evs) == 0 {
		fmt.Fprintln(w, "Events:  <none>")
		return
	}
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	for _, e := range evs {
		age := HumanDuration(now.Sub(e.Last))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, HumanDuration(now.Sub(e.First)))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source, e.Message)
	}
	_ = tw.Flush()
}

func template(w io.Writer, t api.PodTemplateSpec) {
	fmt.Fprintln(w, "Pod Template:")
	fmt.Fprintf(w, "  Labels:\t%s\n", labels(t.Metadata.Labels))
	fmt.Fprintln(w, "  Containers:")
	for _, c := range t.Spec.Containers {
		fmt.Fprintf(w, "   %s:\n", c.Name)
		fmt.Fprintf(w, "    Command:\t%s\n", strings.Join(c.Command, " "))
		if len(c.Resources.Requests) > 0 {
			fmt.Fprintf(w, "    Requests:\t%s\n", quantities(c.Resources.Requests))
		}
	}
}

func conditions(w io.Writer, conds []object.Condition) {
	if len(conds) == 0 {
		return
	}
	fmt.Fprintln(w, "Conditions:")
	fmt.Fprintln(w, "  Type\tStatus\tReason\tMessage")
	fmt.Fprintln(w, "  ----\t------\t------\t-------")
	for _, c := range conds {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, orNone(c.Reason), c.Message)
	}
}

func containerState(w io.Writer, label string, s api.ContainerState) {
	switch {
	case s.Running != nil:
		fmt.Fprintf(w, "%s:\tRunning\n      Started:\t%s\n", label, s.Running.StartedAt.Format(time.RFC1123Z))
	case s.Waiting != nil:
		fmt.Fprintf(w, "%s:\tWaiting\n      Reason:\t%s\n", label, s.Waiting.Reason)
		if s.Waiting.Message != "" {
			fmt.Fprintf(w, "      Message:\t%s\n", s.Waiting.Message)
		}
	case s.Terminated != nil:
		t := s.Terminated
		fmt.Fprintf(w, "%s:\tTerminated\n      Reason:\t%s\n      Exit Code:\t%d\n", label, t.Reason, t.ExitCode)
		if !t.StartedAt.IsZero() {
			fmt.Fprintf(w, "      Started:\t%s\n", t.StartedAt.Format(time.RFC1123Z))
		}
		fmt.Fprintf(w, "      Finished:\t%s\n", t.FinishedAt.Format(time.RFC1123Z))
	default:
		fmt.Fprintf(w, "%s:\tWaiting\n", label)
	}
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

func quantities(rl api.ResourceList) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(rl)) {
		out = append(out, k+"="+string(rl[k]))
	}
	return strings.Join(out, ", ")
}
