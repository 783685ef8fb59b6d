package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// The reasons a filter gives, worded as kube-scheduler's plugins word them
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/{nodename,nodeunschedulable,
// tainttoleration,nodeports,noderesources}), so that an unschedulable
// message reads as Kubernetes' does.
const (
	reasonNodeName      = "node(s) didn't match the requested node name"
	reasonUnschedulable = "node(s) were unschedulable"
	reasonNodePorts     = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"
	reasonTaintFmt      = "node(s) had untolerated taint {%s: %s}"
	reasonInsufficient  = "Insufficient "
)

// defaultMaxPods is the pod capacity of a node whose allocatable does not
// say: kubelet's default maxPods.
const defaultMaxPods = 110

// Requests a pod without any counts as, for scoring only
// (k8s@v1.37.2:pkg/scheduler/util/pod_resources.go DefaultMilliCPURequest,
// DefaultMemoryRequest), so that a node full of request-less pods does not
// look empty.
const (
	nonZeroCPU    = 100                      // 100m, in millicores
	nonZeroMemory = 200 * 1024 * 1024 * 1000 // 200Mi, in milli-bytes
)

// podInfo is what the filters and scores need of a pod, parsed once.
type podInfo struct {
	pod       api.Pod
	cpu, mem  int64 // requests, in thousandths (millicores, milli-bytes)
	hostPorts []int32
	owner     string // the UID of the pod's first owner, "" if it has none
}

func newPodInfo(p api.Pod) (podInfo, error) {
	pi := podInfo{pod: p}
	for _, c := range p.Spec.Containers {
		cpu, err := milliOrZero(c.Resources.Requests[api.ResourceCPU])
		if err != nil {
			return pi, fmt.Errorf("container %q: cpu: %w", c.Name, err)
		}
		mem, err := milliOrZero(c.Resources.Requests[api.ResourceMemory])
		if err != nil {
			return pi, fmt.Errorf("container %q: memory: %w", c.Name, err)
		}
		pi.cpu, pi.mem = pi.cpu+cpu, pi.mem+mem
		for _, port := range c.Ports {
			if port.HostPort > 0 {
				pi.hostPorts = append(pi.hostPorts, port.HostPort)
			}
		}
	}
	if len(p.OwnerReferences) > 0 {
		pi.owner = p.OwnerReferences[0].UID
	}
	return pi, nil
}

// milliOrZero parses q, an absent request (the empty Quantity) as 0.
func milliOrZero(q api.Quantity) (int64, error) {
	if q == "" {
		return 0, nil
	}
	return q.Milli()
}

// nodeInfo is a node with the sums of the pods bound to it (and of those
// assumed bound) that still hold resources. The scheduler's cache keeps
// one per node and updates it pod by pod (add, remove), so that a cycle
// reads each node's totals without looking at its pods.
type nodeInfo struct {
	node               api.Node
	pods               int64          // how many pods
	cpu, mem           int64          // sums of the pods' requests
	nonZeroCPU, nonMem int64          // the same with request-less pods counted as nonZero*
	ports              map[int32]int  // host port -> pods using it
	owners             map[string]int // owner UID -> pods it owns here
	allocCPU, allocMem int64
	allocPods          int64
}

func newNodeInfo(n api.Node, pods []podInfo) nodeInfo {
	ni := nodeInfo{ports: map[int32]int{}, owners: map[string]int{}}
	ni.setNode(n)
	for i := range pods {
		ni.add(&pods[i])
	}
	return ni
}

// setNode replaces the node and what it can hold; its pods stay.
func (ni *nodeInfo) setNode(n api.Node) {
	ni.node = n
	ni.allocCPU, _ = allocatable(n, api.ResourceCPU)
	ni.allocMem, _ = allocatable(n, api.ResourceMemory)
	if p, ok := allocatable(n, api.ResourcePods); ok {
		ni.allocPods = p / 1000
	} else {
		ni.allocPods = defaultMaxPods
	}
}

// add counts p on the node.
func (ni *nodeInfo) add(p *podInfo) { ni.count(p, 1) }

// remove undoes add(p); p must be the podInfo that was added.
func (ni *nodeInfo) remove(p *podInfo) { ni.count(p, -1) }

func (ni *nodeInfo) count(p *podInfo, sign int64) {
	ni.pods += sign
	ni.cpu += sign * p.cpu
	ni.mem += sign * p.mem
	c, m := p.nonZero()
	ni.nonZeroCPU += sign * c
	ni.nonMem += sign * m
	for _, hp := range p.hostPorts {
		if ni.ports[hp] += int(sign); ni.ports[hp] <= 0 {
			delete(ni.ports, hp)
		}
	}
	if p.owner != "" {
		if ni.owners[p.owner] += int(sign); ni.owners[p.owner] <= 0 {
			delete(ni.owners, p.owner)
		}
	}
}

// allocatable returns a resource's allocatable amount in thousandths,
// false if the node does not say (or says something unreadable, which
// counts as nothing).
func allocatable(n api.Node, name string) (int64, bool) {
	q, ok := n.Status.Allocatable[name]
	if !ok {
		return 0, false
	}
	v, err := q.Milli()
	if err != nil {
		return 0, false
	}
	return v, true
}

func (p podInfo) nonZero() (cpu, mem int64) {
	cpu, mem = p.cpu, p.mem
	if cpu == 0 {
		cpu = nonZeroCPU
	}
	if mem == 0 {
		mem = nonZeroMemory
	}
	return cpu, mem
}

// filter is one of the scheduler's filters: the reasons node n cannot take
// pod p, none if it can.
type filter struct {
	name string
	fn   func(p *podInfo, n *nodeInfo) []string
}

// filters run in the default profile's order
// (k8s@v1.37.2:pkg/scheduler/apis/config/v1/default_plugins.go); a node is
// rejected by the first that fails, as the framework stops at the first
// failing filter (k8s@v1.37.2:pkg/scheduler/framework/runtime/framework.go
// RunFilterPlugins).
var filters = []filter{
	{"NodeName", filterNodeName},
	{"NodeUnschedulable", filterUnschedulable},
	{"TaintToleration", filterTaints},
	{"NodePorts", filterNodePorts},
	{"NodeResourcesFit", filterFit},
}

// filterNodeName: a pod that names a node fits only that node
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/nodename/node_name.go).
// The scheduler only sees pods without a node, so it never rejects one
// here; it is kept so that the set of filters is Kubernetes'.
func filterNodeName(p *podInfo, n *nodeInfo) []string {
	if p.pod.Spec.NodeName != "" && p.pod.Spec.NodeName != n.node.Name {
		return []string{reasonNodeName}
	}
	return nil
}

// filterUnschedulable: a cordoned node takes only pods that tolerate the
// unschedulable taint
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go).
func filterUnschedulable(p *podInfo, n *nodeInfo) []string {
	if !n.node.Spec.Unschedulable {
		return nil
	}
	cordon := api.Taint{Key: api.TaintNodeUnschedulable, Effect: api.TaintNoSchedule}
	if _, ok := api.TolerationFor(p.pod.Spec.Tolerations, cordon); ok {
		return nil
	}
	return []string{reasonUnschedulable}
}

// nodeTaints returns the node's taints, plus the NoSchedule taint the
// node lifecycle controller puts on a node that is not Ready
// (not-ready when Ready is False or absent, unreachable when Unknown:
// k8s@v1.37.2:pkg/controller/nodelifecycle/node_lifecycle_controller.go
// doNoScheduleTaintingPass) if it is not there yet. This is how the
// scheduler keeps pods off nodes that are not Ready, as Kubernetes does,
// without waiting for the lifecycle controller's write; a pod that
// tolerates the taint may still go there.
func nodeTaints(n api.Node) []api.Taint {
	key := ""
	c, ok := object.FindCondition(n.Status.Conditions, api.NodeReady)
	switch {
	case !ok || c.Status == object.ConditionFalse:
		key = api.TaintNodeNotReady
	case c.Status == object.ConditionUnknown:
		key = api.TaintNodeUnreachable
	default:
		return n.Spec.Taints
	}
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == api.TaintNoSchedule {
			return n.Spec.Taints
		}
	}
	out := make([]api.Taint, 0, len(n.Spec.Taints)+1)
	out = append(out, n.Spec.Taints...)
	return append(out, api.Taint{Key: key, Effect: api.TaintNoSchedule})
}

// filterTaints: every NoSchedule and NoExecute taint needs a toleration
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
// Filter); the first untolerated one is the reason.
func filterTaints(p *podInfo, n *nodeInfo) []string {
	for _, t := range nodeTaints(n.node) {
		if t.Effect != api.TaintNoSchedule && t.Effect != api.TaintNoExecute {
			continue
		}
		if _, ok := api.TolerationFor(p.pod.Spec.Tolerations, t); !ok {
			return []string{fmt.Sprintf(reasonTaintFmt, t.Key, t.Value)}
		}
	}
	return nil
}

// filterNodePorts: a host port is taken by one pod per node
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/nodeports/node_ports.go).
func filterNodePorts(p *podInfo, n *nodeInfo) []string {
	for _, hp := range p.hostPorts {
		if n.ports[hp] > 0 {
			return []string{reasonNodePorts}
		}
	}
	return nil
}

// filterFit: the requests of the node's pods plus this pod's fit the
// node's allocatable, pod count first, then each resource the pod
// requests; every shortage is a reason
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/noderesources/fit.go
// fitsRequest).
func filterFit(p *podInfo, n *nodeInfo) []string {
	var out []string
	if n.pods+1 > n.allocPods {
		out = append(out, reasonTooManyPods)
	}
	if p.cpu > 0 && n.cpu+p.cpu > n.allocCPU {
		out = append(out, reasonInsufficient+api.ResourceCPU)
	}
	if p.mem > 0 && n.mem+p.mem > n.allocMem {
		out = append(out, reasonInsufficient+api.ResourceMemory)
	}
	return out
}

// runFilters returns the reasons n rejects p for, none if it fits.
func runFilters(p *podInfo, n *nodeInfo) []string {
	for _, f := range filters {
		if r := f.fn(p, n); len(r) > 0 {
			return r
		}
	}
	return nil
}

// unschedulableMessage words the outcome of a failed scheduling cycle as
// kube-scheduler's FitError does
// (k8s@v1.37.2:pkg/scheduler/framework/types.go FitError.Error): each
// reason with the number of nodes that gave it, sorted, after how many
// nodes there were.
func unschedulableMessage(nodes int, reasons map[string]int) string {
	if nodes == 0 {
		return "no nodes available to schedule pods"
	}
	hist := make([]string, 0, len(reasons))
	for r, n := range reasons {
		hist = append(hist, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(hist)
	return fmt.Sprintf("0/%d nodes are available: %s.", nodes, strings.Join(hist, ", "))
}
