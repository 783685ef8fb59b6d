package agent

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// heartbeat registers the node, then renews its Lease every
// LeaseRenewInterval and sets its Ready condition back to True whenever
// someone else (the node lifecycle controller, while the agent was gone)
// set it otherwise, as kubelet's node status loop does
// (pkg/kubelet/kubelet_node_status.go, pkg/kubelet/nodelease). A failed
// write is retried at the next tick.
func (k *kubelet) heartbeat(ctx context.Context) error {
	t := k.cfg.Clock.NewTicker(k.cfg.Timings.LeaseRenewInterval)
	defer t.Stop()
	registered := false
	for {
		if !registered {
			if err := k.register(ctx); err != nil {
				k.cfg.Logger.Warn("cannot register the node", "node", k.cfg.Node, "err", err)
			} else {
				registered = true
				k.rec.Eventf(ctx, k.cfg.Node, events.Normal, "Starting", "Starting kubelet.")
			}
		} else if err := k.ensureReady(ctx); err != nil {
			k.cfg.Logger.Warn("cannot update the node's status", "node", k.cfg.Node, "err", err)
		}
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("cannot renew the node's lease", "node", k.cfg.Node, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// register creates the node, or, if it exists (the agent restarted),
// writes its status: capacity, allocatable and Ready. Its spec (taints,
// unschedulable) is the control plane's and stays.
func (k *kubelet) register(ctx context.Context) error {
	resources := api.ResourceList{api.ResourceCPU: k.cfg.CPU, api.ResourceMemory: k.cfg.Memory,
		api.ResourcePods: api.Quantity(strconv.Itoa(k.cfg.MaxPods))}
	_, _, err := informer.CreateOrUpdate(ctx, k.cfg.Stores.Nodes, k.cfg.Node, func(n *api.Node) error {
		n.Name = k.cfg.Node
		n.Status.Capacity, n.Status.Allocatable = resources, resources
		k.setReady(n)
		return nil
	})
	return err
}

func (k *kubelet) setReady(n *api.Node) {
	object.SetCondition(&n.Status.Conditions, object.Condition{Type: api.NodeReady, Status: object.ConditionTrue,
		Reason: "KubeletReady", Message: "kubelet is posting ready status"}, k.cfg.Clock.Now().UTC())
}

// ensureReady sets the node's Ready condition to True if it is not.
func (k *kubelet) ensureReady(ctx context.Context) error {
	n, _, ok, err := k.cfg.Stores.Nodes.Get(ctx, k.cfg.Node)
	if err != nil || (ok && object.IsTrue(n.Status.Conditions, api.NodeReady)) {
		return err
	}
	if !ok {
		return k.register(ctx) // deleted: register again, as kubelet does
	}
	_, _, err = informer.Update(ctx, k.cfg.Stores.Nodes, k.cfg.Node, func(n *api.Node) error {
		k.setReady(n)
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return nil
	}
	return err
}

// renewLease writes kube-node-lease/<node> with the time of now.
func (k *kubelet) renewLease(ctx context.Context) error {
	now := k.cfg.Clock.Now().UTC()
	key := api.Key(api.NodeLeaseNamespace, k.cfg.Node)
	_, _, err := informer.CreateOrUpdate(ctx, k.cfg.Stores.Leases, key, func(l *api.Lease) error {
		l.Name, l.Namespace = k.cfg.Node, api.NodeLeaseNamespace
		if l.Spec.HolderIdentity != k.cfg.Node || l.Spec.AcquireTime.IsZero() {
			l.Spec.HolderIdentity, l.Spec.AcquireTime = k.cfg.Node, now
		}
		l.Spec.LeaseDurationSeconds = int32(k.cfg.Timings.LeaseDuration / time.Second)
		l.Spec.RenewTime = now
		return nil
	})
	return err
}
