package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/agent"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// apply creates or updates every object of a manifest. The whole manifest
// is read and checked first (api.Decode, api.Default, api.Validate): a bad
// document fails it before anything is written.
func (c *cli) apply(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("apply", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	file := fl.String("f", "", "the manifest (\"-\": stdin)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("must specify -f FILE")
	}
	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("the path %q does not exist or cannot be read: %w", *file, err)
	}
	docs, err := api.Decode(data)
	if err != nil {
		return fmt.Errorf("error validating %q: %w", *file, err)
	}
	if len(docs) == 0 {
		return errors.New("no objects passed to apply")
	}
	for _, d := range docs {
		if m := d.Meta(); m.Namespace == "" && d.Kind != api.KindNode {
			m.Namespace = c.namespace
		}
		check := clone(d.Object)
		api.Default(check, 0)
		if err := api.Validate(check); err != nil {
			return fmt.Errorf("error when applying %q (line %d): %w", *file, d.Line, err)
		}
	}
	for _, d := range docs {
		k, _ := lookupKind(d.Kind)
		var what string
		switch o := d.Object.(type) {
		case *api.Deployment:
			what, err = applyOne(ctx, c.st.Deployments, o, func(dst, src *api.Deployment) { dst.Spec = src.Spec })
		case *api.ReplicaSet:
			what, err = applyOne(ctx, c.st.ReplicaSets, o, func(dst, src *api.ReplicaSet) { dst.Spec = src.Spec })
		case *api.Pod:
			what, err = applyOne(ctx, c.st.Pods, o, func(dst, src *api.Pod) {
				tolerations := dst.Spec.Tolerations
				dst.Spec = src.Spec
				if len(src.Spec.Tolerations) == 0 {
					dst.Spec.Tolerations = tolerations // the API server's defaults
				}
			})
		case *api.Node:
			what, err = applyOne(ctx, c.st.Nodes, o, func(dst, src *api.Node) { dst.Spec = src.Spec })
		case *api.Lease:
			what, err = applyOne(ctx, c.st.Leases, o, func(dst, src *api.Lease) { dst.Spec = src.Spec })
		}
		if err != nil {
			return fmt.Errorf("error when applying %s from %q: %w", k.ref(d.Meta().Name), *file, err)
		}
		fmt.Fprintf(c.stdout, "%s %s\n", k.ref(d.Meta().Name), what)
	}
	return nil
}

// clone deep-copies one of the kinds through JSON.
func clone(obj any) any {
	b, _ := json.Marshal(obj)
	out := newLike(obj)
	_ = json.Unmarshal(b, out)
	return out
}

func newLike(obj any) any {
	switch obj.(type) {
	case *api.Deployment:
		return &api.Deployment{}
	case *api.ReplicaSet:
		return &api.ReplicaSet{}
	case *api.Pod:
		return &api.Pod{}
	case *api.Node:
		return &api.Node{}
	}
	return &api.Lease{}
}

// applyOne creates obj, or updates the live object with obj's spec,
// labels and annotations (and its owner references, if it has any),
// keeping what the control plane wrote: status, UID, finalizers (the API
// server bumps the generation on a spec change). It says "created", "configured" or
// "unchanged".
func applyOne[V any](ctx context.Context, st informer.Store[string, V], obj *V, setSpec func(dst, src *V)) (string, error) {
	m := api.MetaOf(obj)
	key := m.Key()
	// Defaulted as the API server defaults it, so that reapplying an
	// unchanged manifest is no change (the tolerations stay the server's).
	api.Default(obj, -1)
	if _, err := st.Create(ctx, key, *obj); err == nil {
		return "created", nil
	} else if !errors.Is(err, informer.ErrConflict) {
		return "", err
	}
	what := "unchanged"
	_, op, err := informer.Update(ctx, st, key, func(live *V) error {
		lm := api.MetaOf(live)
		if lm.Deleting() {
			return errors.New("the object is being deleted")
		}
		setSpec(live, obj) // the API server bumps the generation if it changed
		lm.Labels = maps.Clone(m.Labels)
		lm.Annotations = maps.Clone(m.Annotations)
		if len(m.OwnerReferences) > 0 {
			lm.OwnerReferences = m.OwnerReferences
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if op == informer.Updated {
		what = "configured"
	}
	return what, nil
}

// delete asks for an object's deletion with kubectl's --cascade
// (background, the default; foreground; orphan; true and false as
// background and orphan).
func (c *cli) delete(ctx context.Context, args []string) error {
	k, name, rest, err := kindAndName(args)
	if err != nil {
		return err
	}
	fl := flag.NewFlagSet("delete", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	cascade := fl.String("cascade", "background", "background, foreground or orphan")
	if err := fl.Parse(rest); err != nil {
		return err
	}
	policy := map[string]string{"background": api.PropagationBackground, "true": api.PropagationBackground,
		"foreground": api.PropagationForeground, "orphan": api.PropagationOrphan, "false": api.PropagationOrphan}[*cascade]
	if policy == "" {
		return fmt.Errorf(`invalid cascade value (%s). Must be "background", "foreground", or "orphan"`, *cascade)
	}
	key := c.key(k, name)
	switch k.name {
	case api.KindDeployment:
		err = api.Delete(ctx, c.st.Deployments, key, policy, time.Now)
	case api.KindReplicaSet:
		err = api.Delete(ctx, c.st.ReplicaSets, key, policy, time.Now)
	case api.KindPod:
		err = api.Delete(ctx, c.st.Pods, key, policy, time.Now)
	case api.KindNode:
		err = api.Delete(ctx, c.st.Nodes, key, policy, time.Now)
	default:
		err = api.Delete(ctx, c.st.Leases, key, policy, time.Now)
	}
	if errors.Is(err, informer.ErrNotFound) {
		return notFoundError{k, name}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s %q deleted\n", strings.Split(k.ref(name), "/")[0], name)
	return nil
}

// scale sets a Deployment's or ReplicaSet's replicas.
func (c *cli) scale(ctx context.Context, args []string) error {
	k, name, rest, err := kindAndName(args)
	if err != nil {
		return err
	}
	fl := flag.NewFlagSet("scale", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	replicas := fl.Int("replicas", -1, "the new number of replicas")
	if err := fl.Parse(rest); err != nil {
		return err
	}
	if *replicas < 0 {
		return errors.New("the --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0")
	}
	n := int32(*replicas)
	key := c.key(k, name)
	switch k.name {
	case api.KindDeployment:
		_, _, err = informer.Update(ctx, c.st.Deployments, key, func(d *api.Deployment) error {
			if api.Replicas(d.Spec.Replicas) != n {
				d.Spec.Replicas = &n
			}
			return nil
		})
	case api.KindReplicaSet:
		_, _, err = informer.Update(ctx, c.st.ReplicaSets, key, func(rs *api.ReplicaSet) error {
			if api.Replicas(rs.Spec.Replicas) != n {
				rs.Spec.Replicas = &n
			}
			return nil
		})
	default:
		return fmt.Errorf("cannot scale %s: only deployments and replicasets scale", k.plural)
	}
	if errors.Is(err, informer.ErrNotFound) {
		return notFoundError{k, name}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s scaled\n", k.ref(name))
	return nil
}

// cordon returns the cordon (on) or uncordon verb.
func (c *cli) cordon(on bool) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return errors.New("exactly one NODE is required")
		}
		what, err := c.setUnschedulable(ctx, args[0], on)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "node/%s %s\n", args[0], what)
		return nil
	}
}

func (c *cli) setUnschedulable(ctx context.Context, node string, on bool) (string, error) {
	_, op, err := informer.Update(ctx, c.st.Nodes, node, func(n *api.Node) error {
		n.Spec.Unschedulable = on
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return "", notFoundError{kinds[3], node}
	}
	what := map[bool]string{true: "cordoned", false: "uncordoned"}[on]
	if op == informer.Unchanged {
		what = "already " + what
	}
	return what, err
}

// logs prints a container's output, from the file its node's agent writes
// on this machine.
func (c *cli) logs(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("logs", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	container := fl.String("c", "", "the container")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = strings.TrimPrefix(args[0], "pod/"), args[1:]
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	if name == "" {
		return errors.New("expected POD: cluster ctl logs POD [-c CONTAINER]")
	}
	o, err := c.getObject(ctx, kinds[2], name)
	if err != nil {
		return err
	}
	p := o.v.(*api.Pod)
	if *container == "" {
		if len(p.Spec.Containers) != 1 {
			var names []string
			for _, ct := range p.Spec.Containers {
				names = append(names, ct.Name)
			}
			return fmt.Errorf("a container name must be specified for pod %s, choose one of: %v", name, names)
		}
		*container = p.Spec.Containers[0].Name
	}
	if p.Spec.NodeName == "" {
		return fmt.Errorf("pod %s is not scheduled to a node yet", name)
	}
	f, err := os.Open(agent.LogPath(agent.LogDir(), p, *container))
	if err != nil {
		return fmt.Errorf("container %q in pod %q has no output on this machine yet: %w", *container, name, err)
	}
	defer f.Close()
	_, err = io.Copy(c.stdout, f)
	return err
}
