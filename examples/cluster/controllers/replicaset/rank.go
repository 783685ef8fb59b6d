package replicaset

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// phaseOrdinal orders phases for deletion: Pending (and no phase yet)
// before Unknown before Running (controller_utils.go podPhaseToOrdinal).
var phaseOrdinal = map[string]int{api.PodPending: 0, api.PodUnknown: 1, api.PodRunning: 2}

// PodsToDelete returns the indexes in pods of the n pods to delete first,
// ranked as Kubernetes ranks them (controller_utils.go
// ActivePodsWithRanks.Less, replica_set.go getPodsToDelete):
//
//  1. unassigned (no node) before assigned;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. doubled up before not: a pod sharing its node with more of related's
//     active pods goes first;
//  5. of two ready pods, the one ready for less time (on a logarithmic
//     scale of its age at now, so pods ready within the same power of two
//     count as equally old);
//  6. more container restarts before fewer;
//  7. newer before older (logarithmic likewise), and then by UID.
//
// related are the pods whose placement counts for rule 4 (the ReplicaSet's
// own, here). Kubernetes' pod-deletion-cost annotation is not modelled.
func PodsToDelete(pods, related []api.Pod, n int, now time.Time) []int {
	idx := make([]int, len(pods))
	for i := range idx {
		idx[i] = i
	}
	if n >= len(pods) {
		return idx
	}
	onNode := map[string]int{}
	for _, p := range related {
		if IsPodActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		return compareForDeletion(pods[i], pods[j], onNode[pods[i].Spec.NodeName], onNode[pods[j].Spec.NodeName], now)
	})
	return idx[:n]
}

// compareForDeletion is negative if a goes before b; rankA and rankB are
// how many related pods share each one's node.
func compareForDeletion(a, b api.Pod, rankA, rankB int, now time.Time) int {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return boolFirst(a.Spec.NodeName == "")
	}
	if c := cmp.Compare(phaseOrdinal[a.Status.Phase], phaseOrdinal[b.Status.Phase]); c != 0 {
		return c
	}
	if a.IsReady() != b.IsReady() {
		return boolFirst(!a.IsReady())
	}
	if rankA != rankB {
		return cmp.Compare(rankB, rankA) // more doubled up first
	}
	if a.IsReady() && b.IsReady() {
		ta, tb := readySince(a), readySince(b)
		if !ta.Equal(tb) {
			if c := compareAge(ta, tb, now); c != 0 {
				return c
			}
			return cmp.Compare(a.UID, b.UID)
		}
	}
	if c := cmp.Compare(maxRestarts(b), maxRestarts(a)); c != 0 {
		return c
	}
	if !a.CreationTimestamp.Equal(b.CreationTimestamp) {
		if c := compareAge(a.CreationTimestamp, b.CreationTimestamp, now); c != 0 {
			return c
		}
		return cmp.Compare(a.UID, b.UID)
	}
	return 0
}

// compareAge puts the later of two different times first: a zero time
// first of all, and, with now, by the power of two of their age only
// (controller_utils.go afterOrZero, logarithmicRankDiff); 0 if they are in
// the same power of two.
func compareAge(a, b, now time.Time) int {
	if now.IsZero() || a.IsZero() || b.IsZero() {
		if a.IsZero() || b.IsZero() {
			return boolFirst(a.IsZero())
		}
		return boolFirst(a.After(b))
	}
	return cmp.Compare(log2Age(a, now), log2Age(b, now))
}

func log2Age(t, now time.Time) int64 {
	d := now.Sub(t)
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

// boolFirst is -1 if first, else 1.
func boolFirst(first bool) int {
	if first {
		return -1
	}
	return 1
}

// readySince is when p's Ready condition last turned True; the zero time
// if it is not ready.
func readySince(p api.Pod) time.Time {
	c, ok := object.FindCondition(p.Status.Conditions, api.PodReady)
	if !ok || c.Status != object.ConditionTrue {
		return time.Time{}
	}
	return c.LastTransitionTime
}

func maxRestarts(p api.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}
