package api

import (
	"time"

	"github.com/converge-go/converge/object"
)

// Node is a machine that runs pods: its node agent registers it and keeps
// its status; the node lifecycle controller marks it Ready=Unknown and
// taints it when the agent's Lease stops being renewed. A node's key is its
// name.
type Node struct {
	Metadata `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status,omitzero"`
}

// NodeSpec holds what users and controllers set on a node.
type NodeSpec struct {
	// Unschedulable is set by cordon: no new pod is bound to the node.
	Unschedulable bool    `json:"unschedulable,omitempty"`
	Taints        []Taint `json:"taints,omitempty"`
}

// Taint repels pods that do not tolerate it: NoSchedule keeps new pods
// off, NoExecute also evicts running ones.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
	// TimeAdded is when a NoExecute taint was added; tolerationSeconds
	// count from it.
	TimeAdded time.Time `json:"timeAdded,omitzero"`
}

// Taint effects.
const (
	TaintNoSchedule       = "NoSchedule"
	TaintPreferNoSchedule = "PreferNoSchedule"
	TaintNoExecute        = "NoExecute"
)

// Taints the node lifecycle controller sets, and the one cordon implies.
const (
	TaintNodeNotReady      = "node.kubernetes.io/not-ready"
	TaintNodeUnreachable   = "node.kubernetes.io/unreachable"
	TaintNodeUnschedulable = "node.kubernetes.io/unschedulable"
)

// NodeStatus is what the node agent reports, and the Ready condition the
// node lifecycle controller overrides when the agent goes quiet.
type NodeStatus struct {
	Capacity    ResourceList       `json:"capacity,omitempty"`
	Allocatable ResourceList       `json:"allocatable,omitempty"`
	Conditions  []object.Condition `json:"conditions,omitempty"`
}

// NodeReady is the node condition: True while the agent reports, Unknown
// once its lease has not been renewed for the grace period.
const NodeReady = "Ready"

// Lease is a node agent's heartbeat (Kubernetes keeps them in the
// kube-node-lease namespace, one per node, named after it). The agent
// renews it; the node lifecycle controller reads RenewTime.
type Lease struct {
	Metadata `json:"metadata"`
	Spec     LeaseSpec `json:"spec"`
}

// LeaseSpec is the holder and the last renewal.
type LeaseSpec struct {
	HolderIdentity       string    `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds int32     `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          time.Time `json:"acquireTime,omitzero"`
	RenewTime            time.Time `json:"renewTime,omitzero"`
}

// NodeLeaseNamespace is where node leases live.
const NodeLeaseNamespace = "kube-node-lease"
