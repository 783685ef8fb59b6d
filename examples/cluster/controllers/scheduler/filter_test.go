package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

func TestTolerationShouldMatchTaintsAsKubernetesDoes(t *testing.T) {
	taint := api.Taint{Key: "dedicated", Value: "gpu", Effect: api.TaintNoSchedule}
	for _, tc := range []struct {
		name string
		tol  api.Toleration
		want bool
	}{
		{"equal key, value and effect", api.Toleration{Key: "dedicated", Value: "gpu", Effect: api.TaintNoSchedule}, true},
		{"no operator is Equal", api.Toleration{Key: "dedicated", Value: "gpu"}, true},
		{"equal with another value", api.Toleration{Key: "dedicated", Operator: "Equal", Value: "cpu"}, false},
		{"exists ignores the value", api.Toleration{Key: "dedicated", Operator: "Exists"}, true},
		{"another key", api.Toleration{Key: "other", Operator: "Exists"}, false},
		{"empty key with Exists matches every taint", api.Toleration{Operator: "Exists"}, true},
		{"empty effect matches every effect", api.Toleration{Key: "dedicated", Operator: "Exists"}, true},
		{"another effect", api.Toleration{Key: "dedicated", Operator: "Exists", Effect: api.TaintNoExecute}, false},
		{"unknown operator", api.Toleration{Key: "dedicated", Operator: "Gt", Value: "gpu"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.tol.ToleratesTaint(taint))
		})
	}
}

func TestFiltersShouldRejectANodeForKubernetesReasons(t *testing.T) {
	notReady := readyNode("n", "4", "8Gi")
	notReady.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionFalse}}
	unknown := readyNode("n", "4", "8Gi")
	unknown.Status.Conditions = []object.Condition{{Type: api.NodeReady, Status: object.ConditionUnknown}}
	noCondition := readyNode("n", "4", "8Gi")
	noCondition.Status.Conditions = nil
	cordoned := readyNode("n", "4", "8Gi")
	cordoned.Spec.Unschedulable = true
	tainted := readyNode("n", "4", "8Gi")
	tainted.Spec.Taints = []api.Taint{{Key: "dedicated", Value: "gpu", Effect: api.TaintNoSchedule}}
	noExec := readyNode("n", "4", "8Gi")
	noExec.Spec.Taints = []api.Taint{{Key: "k", Effect: api.TaintNoExecute}}
	prefer := readyNode("n", "4", "8Gi")
	prefer.Spec.Taints = []api.Taint{{Key: "k", Effect: api.TaintPreferNoSchedule}}
	twoPods := readyNode("n", "4", "8Gi")
	twoPods.Status.Allocatable[api.ResourcePods] = "2"

	tolerate := func(p api.Pod, tol ...api.Toleration) api.Pod { p.Spec.Tolerations = tol; return p }
	small := reqPod("p", "500m", "1Gi")
	named := reqPod("p", "", "")
	named.Spec.NodeName = "other"

	for _, tc := range []struct {
		name     string
		pod      api.Pod
		node     api.Node
		existing []api.Pod
		want     []string
	}{
		{"a ready node with room fits", small, readyNode("n", "4", "8Gi"), nil, nil},
		{"NodeName: another node named", named, readyNode("n", "4", "8Gi"), nil, []string{reasonNodeName}},
		{"NodeUnschedulable: cordoned", small, cordoned, nil, []string{reasonUnschedulable}},
		{"NodeUnschedulable: cordon tolerated", tolerate(small, api.Toleration{Key: api.TaintNodeUnschedulable, Operator: "Exists", Effect: api.TaintNoSchedule}), cordoned, nil, nil},
		{"TaintToleration: NoSchedule untolerated", small, tainted, nil, []string{"node(s) had untolerated taint {dedicated: gpu}"}},
		{"TaintToleration: NoSchedule tolerated", tolerate(small, api.Toleration{Key: "dedicated", Value: "gpu"}), tainted, nil, nil},
		{"TaintToleration: NoExecute untolerated", small, noExec, nil, []string{"node(s) had untolerated taint {k: }"}},
		{"TaintToleration: PreferNoSchedule never filters", small, prefer, nil, nil},
		{"TaintToleration: everything tolerated", tolerate(small, api.Toleration{Operator: "Exists"}), tainted, nil, nil},
		{"Ready False is the not-ready taint", small, notReady, nil, []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"no Ready condition is the not-ready taint", small, noCondition, nil, []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"Ready Unknown is the unreachable taint", small, unknown, nil, []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"the not-ready taint tolerated", tolerate(small, api.Toleration{Key: api.TaintNodeNotReady, Operator: "Exists"}), notReady, nil, nil},
		{"NodePorts: host port taken", withHostPort(small, 8080), readyNode("n", "4", "8Gi"), []api.Pod{withHostPort(reqPod("q", "", ""), 8080)}, []string{reasonNodePorts}},
		{"NodePorts: another host port", withHostPort(small, 8080), readyNode("n", "4", "8Gi"), []api.Pod{withHostPort(reqPod("q", "", ""), 9090)}, nil},
		{"Fit: cpu exactly full fits", reqPod("p", "1", ""), readyNode("n", "4", "8Gi"), []api.Pod{reqPod("q", "3", "")}, nil},
		{"Fit: one millicore over", reqPod("p", "1001m", ""), readyNode("n", "4", "8Gi"), []api.Pod{reqPod("q", "3", "")}, []string{"Insufficient cpu"}},
		{"Fit: memory over", reqPod("p", "", "5Gi"), readyNode("n", "4", "8Gi"), []api.Pod{reqPod("q", "", "4Gi")}, []string{"Insufficient memory"}},
		{"Fit: both over, both reasons", reqPod("p", "2", "5Gi"), readyNode("n", "4", "8Gi"), []api.Pod{reqPod("q", "3", "4Gi")}, []string{"Insufficient cpu", "Insufficient memory"}},
		{"Fit: no request fits a full node", reqPod("p", "", ""), readyNode("n", "4", "8Gi"), []api.Pod{reqPod("q", "4", "8Gi")}, nil},
		{"Fit: pod count at the limit", small, twoPods, []api.Pod{reqPod("a", "", ""), reqPod("b", "", "")}, []string{reasonTooManyPods}},
		{"Fit: pod count below the limit", small, twoPods, []api.Pod{reqPod("a", "", "")}, nil},
		{"Fit: a node without cpu takes no cpu request", small, readyNode("n", "", "8Gi"), nil, []string{"Insufficient cpu"}},
		{"the first failing filter is the reason", small, func() api.Node { n := cordoned; n.Spec.Taints = tainted.Spec.Taints; return n }(), nil, []string{reasonUnschedulable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := mustPodInfo(tc.pod)
			assert.Equal(t, tc.want, runFilters(&pi, infoOf(tc.node, tc.existing...)))
		})
	}
}

func TestUnschedulableMessageShouldCountNodesPerReasonSortedAsKubernetesDoes(t *testing.T) {
	msg := unschedulableMessage(3, map[string]int{
		"Insufficient cpu": 2,
		"node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
	})
	assert.Equal(t, "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu.", msg)
	assert.Equal(t, "no nodes available to schedule pods", unschedulableMessage(0, nil))
}

func TestPodInfoShouldRejectAnUnreadableRequest(t *testing.T) {
	_, err := newPodInfo(reqPod("p", "lots", ""))
	assert.ErrorContains(t, err, `cpu: quantity "lots"`)
}
