package api

import "github.com/converge-go/converge/informer"

// PodNodeNameIndex is the name of the pods informer's index by
// Spec.NodeName: the pods bound to a node, which the node lifecycle
// controller evicts. Unbound pods are not filed.
const PodNodeNameIndex = "spec.nodeName"

// AddPodNodeNameIndex adds PodNodeNameIndex to the pods informer unless it
// has it already, so that every controller that needs it may call it.
func AddPodNodeNameIndex(pods *informer.Informer[string, Pod]) error {
	if pods.HasIndex(PodNodeNameIndex) {
		return nil
	}
	return pods.AddIndex(PodNodeNameIndex, func(_ string, p Pod) []string {
		if p.Spec.NodeName == "" {
			return nil
		}
		return []string{p.Spec.NodeName}
	})
}

// LabelTopologyZone is the node label that names a node's zone: the
// scheduler spreads an owner's pods over zones, and the node lifecycle
// controller rates evictions per zone. A node without it is in the zone "".
const LabelTopologyZone = "topology.kubernetes.io/zone"

// Toleration operators.
const (
	TolerationOpEqual  = "Equal"
	TolerationOpExists = "Exists"
)

// ToleratesTaint reports whether t tolerates taint, as Kubernetes matches
// them (k8s.io/api core/v1 toleration.go ToleratesTaint): an empty Effect
// matches every effect, an empty Key every key; Exists matches any value,
// Equal (or no operator) the same value.
func (t Toleration) ToleratesTaint(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", TolerationOpEqual:
		return t.Value == taint.Value
	case TolerationOpExists:
		return true
	default:
		return false
	}
}

// TolerationFor returns the first of tolerations that tolerates taint.
func TolerationFor(tolerations []Toleration, taint Taint) (Toleration, bool) {
	for _, t := range tolerations {
		if t.ToleratesTaint(taint) {
			return t, true
		}
	}
	return Toleration{}, false
}
