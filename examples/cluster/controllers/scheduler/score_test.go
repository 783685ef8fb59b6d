package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/examples/cluster/api"
)

func TestLeastAllocatedShouldScoreTheRoomLeftAfterThePod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      api.Pod
		existing []api.Pod
		want     int64
	}{
		// 4 cpu, 8Gi: the pod's 1 cpu and 2Gi leave 75% of each.
		{"an empty node", reqPod("p", "1", "2Gi"), nil, 75},
		// cpu (4-3)/4 = 25, memory (8-4)/8 = 50: their mean.
		{"the mean of cpu and memory", reqPod("p", "1", "2Gi"), []api.Pod{reqPod("q", "2", "2Gi")}, 37},
		{"a full node scores 0", reqPod("p", "2", "4Gi"), []api.Pod{reqPod("q", "2", "4Gi")}, 0},
		// No requests count as 100m and 200Mi: (4000-100)/4000 = 97, (8192-200)/8192 = 97.
		{"no requests count as the non-zero defaults", reqPod("p", "", ""), nil, 97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := mustPodInfo(tc.pod)
			assert.Equal(t, tc.want, scoreLeastAllocated(&pi, infoOf(readyNode("n", "4", "8Gi"), tc.existing...)))
		})
	}
}

func TestBalancedAllocationShouldFavourEqualSharesOfCPUAndMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  api.Pod
		node api.Node
		want int64
	}{
		{"equal shares score 100", reqPod("p", "2", "4Gi"), readyNode("n", "4", "8Gi"), 100},
		// cpu 1.0, memory 0.0: std 0.5.
		{"opposite shares score 50", reqPod("p", "4", "1"), readyNode("n", "4", "8Gi"), 50},
		// cpu 0.5, memory 0.25: std 0.125.
		{"unequal shares", reqPod("p", "2", "2Gi"), readyNode("n", "4", "8Gi"), 87},
		{"a resource the node lacks is left out", reqPod("p", "2", "2Gi"), readyNode("n", "4", ""), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := mustPodInfo(tc.pod)
			assert.Equal(t, tc.want, scoreBalanced(&pi, infoOf(tc.node)))
		})
	}
}

func TestTaintScoreShouldReverseTheCountOfUntoleratedPreferNoScheduleTaints(t *testing.T) {
	prefer := func(name string, keys ...string) *nodeInfo {
		n := readyNode(name, "4", "8Gi")
		for _, k := range keys {
			n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: k, Effect: api.TaintPreferNoSchedule})
		}
		n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: "hard", Effect: api.TaintNoSchedule})
		return infoOf(n)
	}
	nodes := []*nodeInfo{prefer("a"), prefer("b", "x"), prefer("c", "x", "y")}
	pi := mustPodInfo(reqPod("p", "", ""))
	assert.Equal(t, []int64{100, 50, 0}, scoreTaints(&pi, nodes), "NoSchedule taints are not counted")

	tolerating := reqPod("p", "", "")
	tolerating.Spec.Tolerations = []api.Toleration{{Key: "y", Operator: "Exists", Effect: api.TaintPreferNoSchedule}}
	pi = mustPodInfo(tolerating)
	assert.Equal(t, []int64{100, 0, 0}, scoreTaints(&pi, nodes), "a tolerated taint does not count")

	noExec := reqPod("p", "", "")
	noExec.Spec.Tolerations = []api.Toleration{{Operator: "Exists", Effect: api.TaintNoExecute}}
	pi = mustPodInfo(noExec)
	assert.Equal(t, []int64{100, 50, 0}, scoreTaints(&pi, nodes), "a toleration of another effect does not count")

	pi = mustPodInfo(reqPod("p", "", ""))
	assert.Equal(t, []int64{100, 100}, scoreTaints(&pi, []*nodeInfo{prefer("a"), prefer("b")}), "no taints: all 100")
}

func TestSpreadShouldFavourNodesWithFewerPodsOfTheSameOwner(t *testing.T) {
	mine := func(name string) api.Pod { return ownedBy(reqPod(name, "", ""), "rs-1") }
	other := func(name string) api.Pod { return ownedBy(reqPod(name, "", ""), "rs-2") }
	nodes := []*nodeInfo{
		infoOf(readyNode("a", "4", "8Gi"), mine("1"), mine("2")),
		infoOf(readyNode("b", "4", "8Gi"), mine("3"), other("4"), other("5")),
		infoOf(readyNode("c", "4", "8Gi"), other("6")),
	}
	pi := mustPodInfo(mine("new"))
	got := scoreSpread(&pi, nodes)
	// raw = count*log(5) + 2: a 5, b 4, c 2; normalised 100*(5+2-raw)/5.
	assert.Equal(t, []int64{40, 60, 100}, got)

	orphan := mustPodInfo(reqPod("new", "", ""))
	assert.Equal(t, []int64{0, 0, 0}, scoreSpread(&orphan, nodes), "a pod without an owner is not spread")
}

func TestSpreadShouldAlsoSpreadOverZones(t *testing.T) {
	inZone := func(name, zone string, pods ...api.Pod) *nodeInfo {
		n := readyNode(name, "4", "8Gi")
		n.Labels = map[string]string{api.LabelTopologyZone: zone}
		return infoOf(n, pods...)
	}
	mine := func(name string) api.Pod { return ownedBy(reqPod(name, "", ""), "rs-1") }
	// a and b share zone z1, which holds two of the owner's pods; c is alone
	// in z2 with none. b and c hold no pod each: the zone tells them apart.
	nodes := []*nodeInfo{inZone("a", "z1", mine("1"), mine("2")), inZone("b", "z1"), inZone("c", "z2")}
	pi := mustPodInfo(mine("new"))
	got := scoreSpread(&pi, nodes)
	assert.Greater(t, got[2], got[1], "the empty zone wins over the busy zone's empty node")
	assert.Greater(t, got[1], got[0])
}

func TestPickNodeShouldTakeTheHighestTotalAndSpreadTiesOverPods(t *testing.T) {
	assert.Equal(t, 1, pickNode([]int64{10, 30, 20}, 0, "default/p", "u"))
	assert.Equal(t, -1, pickNode(nil, 0, "default/p", "u"))

	seen := map[int]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		i := pickNode([]int64{5, 7, 7, 7}, 42, "default/"+name, "u-"+name)
		assert.Contains(t, []int{1, 2, 3}, i)
		assert.Equal(t, i, pickNode([]int64{5, 7, 7, 7}, 42, "default/"+name, "u-"+name), "the same seed and pod pick the same node")
		seen[i] = true
	}
	assert.Greater(t, len(seen), 1, "ties are not always broken toward the same node")
}

func TestScoreNodesShouldWeighThePluginsAsTheDefaultProfile(t *testing.T) {
	pi := mustPodInfo(reqPod("p", "2", "4Gi"))
	n := infoOf(readyNode("a", "4", "8Gi"))
	// taint 100*3 + spread 0*2 (no owner) + least allocated 50 + balanced 100.
	assert.Equal(t, []int64{300 + 0 + 50 + 100}, scoreNodes(&pi, []*nodeInfo{n}))
}
