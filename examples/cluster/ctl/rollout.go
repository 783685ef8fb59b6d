package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// rollout is kubectl rollout's status, history and undo, client-side as
// kubectl does them (kubectl's pkg/polymorphichelpers rollout_status.go,
// history.go, rollback.go).
func (c *cli) rollout(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("rollout needs a subcommand: status, history or undo")
	}
	sub := args[0]
	k, name, rest, err := kindAndName(args[1:])
	if err != nil {
		return err
	}
	if k.name != api.KindDeployment {
		return fmt.Errorf("no rollout for %s: only deployments roll out", k.plural)
	}
	fl := flag.NewFlagSet("rollout", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	toRevision := fl.Int64("to-revision", 0, "undo: the revision to go back to (0: the previous one)")
	timeout := fl.Duration("timeout", 5*time.Minute, "status: how long to wait")
	if err := fl.Parse(rest); err != nil {
		return err
	}
	key := c.key(k, name)
	switch sub {
	case "status":
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return c.rolloutStatus(ctx, key, name)
	case "history":
		_, rss, err := c.history(ctx, key, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deployment.apps/%s\n", name)
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
		for _, rs := range rss {
			fmt.Fprintf(tw, "%d\t%s\n", revision(rs), orNone(rs.Annotations["kubernetes.io/change-cause"]))
		}
		return tw.Flush()
	case "undo":
		return c.undo(ctx, key, name, *toRevision)
	}
	return fmt.Errorf("unknown rollout subcommand %q: want status, history or undo", sub)
}

// history returns the Deployment and the ReplicaSets it controls, by
// revision.
func (c *cli) history(ctx context.Context, key, name string) (*api.Deployment, []*api.ReplicaSet, error) {
	d, _, ok, err := c.st.Deployments.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, notFoundError{kinds[0], name}
	}
	entries, _, err := c.st.ReplicaSets.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var rss []*api.ReplicaSet
	for _, e := range entries {
		if r, ok := api.ControllerOf(e.Value.Metadata); e.Err == nil && ok && r.UID == d.UID && e.Value.Namespace == d.Namespace {
			rs := e.Value
			rss = append(rss, &rs)
		}
	}
	slices.SortFunc(rss, func(a, b *api.ReplicaSet) int { return int(revision(a) - revision(b)) })
	return &d, rss, nil
}

func revision(rs *api.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[api.RevisionAnnotation], 10, 64)
	return n
}

// undo copies an old ReplicaSet's template (without its
// pod-template-hash label) into the Deployment: the deployment controller
// then rolls to it.
func (c *cli) undo(ctx context.Context, key, name string, to int64) error {
	d, rss, err := c.history(ctx, key, name)
	if err != nil {
		return err
	}
	var target *api.ReplicaSet
	if to == 0 {
		if len(rss) < 2 {
			return errors.New("no rollout history found for deployment \"" + name + "\"")
		}
		target = rss[len(rss)-2] // the one before the current revision
	} else {
		for _, rs := range rss {
			if revision(rs) == to {
				target = rs
			}
		}
		if target == nil {
			return fmt.Errorf("unable to find specified revision %d in history", to)
		}
	}
	tmpl := target.Spec.Template
	tmpl.Metadata.Labels = maps.Clone(tmpl.Metadata.Labels)
	delete(tmpl.Metadata.Labels, api.PodTemplateHashLabel)
	if reflect.DeepEqual(tmpl, d.Spec.Template) {
		fmt.Fprintf(c.stdout, "deployment.apps/%s skipped rollback (current template already matches revision %d)\n", name, revision(target))
		return nil
	}
	_, _, err = informer.Update(ctx, c.st.Deployments, key, func(d *api.Deployment) error {
		d.Spec.Template = tmpl
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "deployment.apps/%s rolled back\n", name)
	return nil
}

// rolloutStatus prints the rollout's progress as it changes, until it is
// complete (nil), its progress deadline is exceeded or ctx ends (errors).
func (c *cli) rolloutStatus(ctx context.Context, key, name string) error {
	last := ""
	check := func(d *api.Deployment) (bool, error) {
		msg, done, err := RolloutStatus(d)
		if err != nil {
			return true, err
		}
		if msg != last {
			fmt.Fprintln(c.stdout, msg)
			last = msg
		}
		return done, nil
	}
	d, rev, ok, err := c.st.Deployments.Get(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return notFoundError{kinds[0], name}
	}
	if done, err := check(&d); done || err != nil {
		return err
	}
	errDone := errors.New("done")
	var result error
	err = c.st.Deployments.Watch(ctx, rev, func(ev informer.Event[string, api.Deployment]) error {
		if ev.Key != key {
			return nil
		}
		if ev.Type == informer.Delete {
			result = fmt.Errorf("deployment %q was deleted", name)
			return errDone
		}
		if ev.Type != informer.Put || ev.Err != nil {
			return nil
		}
		done, err := check(&ev.Value)
		if done {
			result = err
			return errDone
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return result
	}
	if ctx.Err() != nil {
		return errors.New("timed out waiting for the condition")
	}
	return err
}

// RolloutStatus is kubectl's DeploymentStatusViewer: a message, whether the
// rollout is complete, and an error once its progress deadline is
// exceeded.
func RolloutStatus(d *api.Deployment) (string, bool, error) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for deployment spec update to be observed...", false, nil
	}
	if c, ok := object.FindCondition(d.Status.Conditions, api.DeploymentProgressing); ok && c.Reason == api.ReasonProgressDeadlineExceeded {
		return "", true, fmt.Errorf("deployment %q exceeded its progress deadline", d.Name)
	}
	want := api.Replicas(d.Spec.Replicas)
	s := d.Status
	switch {
	case s.UpdatedReplicas < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", d.Name, s.UpdatedReplicas, want), false, nil
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", d.Name, s.Replicas-s.UpdatedReplicas), false, nil
	case s.AvailableReplicas < s.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", d.Name, s.AvailableReplicas, s.UpdatedReplicas), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out", d.Name), true, nil
}
