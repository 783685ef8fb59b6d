package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// drain cordons a node and evicts its pods, then waits until they are
// gone, as kubectl drain does. A pod no controller owns is not evicted
// (it would not come back) unless --force.
func (c *cli) drain(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("exactly one NODE is required: cluster ctl drain NODE")
	}
	node := args[0]
	fl := flag.NewFlagSet("drain", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	force := fl.Bool("force", false, "also evict pods no controller owns")
	timeout := fl.Duration("timeout", time.Minute, "how long to wait for the pods to go")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	what, err := c.setUnschedulable(ctx, node, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "node/%s %s\n", node, what)
	pods := func() ([]api.Pod, error) {
		entries, _, err := c.st.Pods.List(ctx)
		if err != nil {
			return nil, err
		}
		var out []api.Pod
		for _, e := range entries {
			if e.Err == nil && e.Value.Spec.NodeName == node {
				out = append(out, e.Value)
			}
		}
		return out, nil
	}
	on, err := pods()
	if err != nil {
		return err
	}
	var unmanaged []string
	for _, p := range on {
		if _, ok := api.ControllerOf(p.Metadata); !ok && !*force {
			unmanaged = append(unmanaged, p.Key())
		}
	}
	if len(unmanaged) > 0 {
		return fmt.Errorf("cannot delete Pods that declare no controller (use --force to override): %s", strings.Join(unmanaged, ", "))
	}
	for _, p := range on {
		fmt.Fprintf(c.stdout, "evicting pod %s\n", p.Key())
		if err := api.Delete(ctx, c.st.Pods, p.Key(), "", time.Now); err != nil && !errors.Is(err, informer.ErrNotFound) {
			return err
		}
	}
	deadline := time.Now().Add(*timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := pods()
		if err != nil {
			return err
		}
		gone := 0
		for _, p := range on {
			if !containsPod(left, p) {
				gone++
			}
		}
		if gone == len(on) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain did not complete within %v: %d pods left", *timeout, len(on)-gone)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	for _, p := range on {
		fmt.Fprintf(c.stdout, "pod/%s evicted\n", p.Name)
	}
	fmt.Fprintf(c.stdout, "node/%s drained\n", node)
	return nil
}

// containsPod reports whether the same pod (same key and UID) is in ps.
func containsPod(ps []api.Pod, p api.Pod) bool {
	for _, q := range ps {
		if q.Key() == p.Key() && q.UID == p.UID {
			return true
		}
	}
	return false
}
