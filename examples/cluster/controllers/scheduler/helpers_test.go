package scheduler

import (
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// readyNode is a node whose agent reports Ready, with cpu and memory
// allocatable ("" leaves a resource out).
func readyNode(name, cpu, mem string) api.Node {
	var n api.Node
	n.Name = name
	n.Status.Allocatable = api.ResourceList{}
	if cpu != "" {
		n.Status.Allocatable[api.ResourceCPU] = api.Quantity(cpu)
	}
	if mem != "" {
		n.Status.Allocatable[api.ResourceMemory] = api.Quantity(mem)
	}
	n.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionTrue, Reason: "KubeletReady"}}
	return n
}

// reqPod is a pod of one container requesting cpu and memory ("" for none).
func reqPod(name, cpu, mem string) api.Pod {
	var p api.Pod
	p.Name, p.Namespace, p.UID = name, "default", "uid-"+name
	req := api.ResourceList{}
	if cpu != "" {
		req[api.ResourceCPU] = api.Quantity(cpu)
	}
	if mem != "" {
		req[api.ResourceMemory] = api.Quantity(mem)
	}
	p.Spec.Containers = []api.Container{{Name: "c", Command: []string{"cluster", "worker"}, Resources: api.ResourceRequirements{Requests: req}}}
	return p
}

func ownedBy(p api.Pod, uid string) api.Pod {
	p.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: uid, Controller: true}}
	return p
}

func withHostPort(p api.Pod, port int32) api.Pod {
	c := p.Spec.Containers[0]
	c.Ports = []api.ContainerPort{{ContainerPort: port, HostPort: port}}
	p.Spec.Containers = []api.Container{c}
	return p
}

func mustPodInfo(p api.Pod) podInfo {
	pi, err := newPodInfo(p)
	if err != nil {
		panic(err)
	}
	return pi
}

func infoOf(n api.Node, pods ...api.Pod) *nodeInfo {
	var ps []podInfo
	for _, p := range pods {
		ps = append(ps, mustPodInfo(p))
	}
	ni := newNodeInfo(n, ps)
	return &ni
}
