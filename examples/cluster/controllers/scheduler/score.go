package scheduler

import (
	"hash/fnv"
	"math"

	"github.com/converge-go/converge/examples/cluster/api"
)

// maxNodeScore is the best score a plugin gives a node
// (kube-scheduler@v0.37.2:framework/interface.go MaxNodeScore).
const maxNodeScore = 100

// The default profile's score weights
// (k8s@v1.37.2:pkg/scheduler/apis/config/v1/default_plugins.go):
// TaintToleration 3, PodTopologySpread 2, NodeResourcesFit and
// NodeResourcesBalancedAllocation 1.
const (
	weightTaint    = 3
	weightSpread   = 2
	weightFit      = 1
	weightBalanced = 1
)

// The system default spreading constraints, applied to a pod that sets
// none: by host with maxSkew 3 and by zone with maxSkew 5, both
// ScheduleAnyway, so they only score
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/podtopologyspread/plugin.go
// systemDefaultConstraints).
const (
	maxSkewHost = 3
	maxSkewZone = 5
)

// scorer computes one plugin's scores for the feasible nodes, already
// normalised to 0..maxNodeScore.
type scorer struct {
	name   string
	weight int64
	fn     func(p *podInfo, nodes []*nodeInfo) []int64
}

var scorers = []scorer{
	{"TaintToleration", weightTaint, scoreTaints},
	{"PodTopologySpread", weightSpread, scoreSpread},
	{"NodeResourcesFit", weightFit, perNode(scoreLeastAllocated)},
	{"NodeResourcesBalancedAllocation", weightBalanced, perNode(scoreBalanced)},
}

func perNode(fn func(p *podInfo, n *nodeInfo) int64) func(*podInfo, []*nodeInfo) []int64 {
	return func(p *podInfo, nodes []*nodeInfo) []int64 {
		out := make([]int64, len(nodes))
		for i, n := range nodes {
			out[i] = fn(p, n)
		}
		return out
	}
}

// scoreLeastAllocated favours the node with the most room left: for cpu
// and memory, (allocatable - requested) * 100 / allocatable, requested
// including the pod and counting request-less pods at the non-zero
// defaults, then their mean
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/noderesources/least_allocated.go).
func scoreLeastAllocated(p *podInfo, n *nodeInfo) int64 {
	pc, pm := p.nonZero()
	return (leastAllocated(n.nonZeroCPU+pc, n.allocCPU) + leastAllocated(n.nonMem+pm, n.allocMem)) / 2
}

func leastAllocated(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

// scoreBalanced favours the node whose cpu and memory would be used in
// the most equal shares: (1 - the standard deviation of the fractions
// requested/allocatable) * 100; a resource the node has none of is left
// out (k8s@v1.37.2:pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go).
func scoreBalanced(p *podInfo, n *nodeInfo) int64 {
	pc, pm := p.nonZero()
	var fractions []float64
	for _, r := range [][2]int64{{n.nonZeroCPU + pc, n.allocCPU}, {n.nonMem + pm, n.allocMem}} {
		if r[1] == 0 {
			continue
		}
		fractions = append(fractions, math.Min(float64(r[0])/float64(r[1]), 1))
	}
	std := 0.0
	if len(fractions) == 2 {
		std = math.Abs(fractions[0]-fractions[1]) / 2
	}
	return int64((1 - std) * maxNodeScore)
}

// scoreTaints favours nodes with fewer PreferNoSchedule taints the pod
// does not tolerate, normalised so that the node with the most scores 0
// and a node with none 100
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
// Score and NormalizeScore, helper.DefaultNormalizeScore reversed).
func scoreTaints(p *podInfo, nodes []*nodeInfo) []int64 {
	var prefer []api.Toleration
	for _, t := range p.pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == api.TaintPreferNoSchedule {
			prefer = append(prefer, t)
		}
	}
	raw := make([]int64, len(nodes))
	var hi int64
	for i, n := range nodes {
		for _, t := range n.node.Spec.Taints {
			if t.Effect != api.TaintPreferNoSchedule {
				continue
			}
			if _, ok := api.TolerationFor(prefer, t); !ok {
				raw[i]++
			}
		}
		hi = max(hi, raw[i])
	}
	for i := range raw {
		if hi == 0 {
			raw[i] = maxNodeScore
		} else {
			raw[i] = maxNodeScore - raw[i]*maxNodeScore/hi
		}
	}
	return raw
}

// scoreSpread spreads the pods of one owner over hosts and zones as the
// system default topology spreading does
// (k8s@v1.37.2:pkg/scheduler/framework/plugins/podtopologyspread/scoring.go):
// a node's raw score is, per constraint, the owner's pods in its domain
// times log(domains + 2), plus maxSkew - 1; the raw scores are then
// reversed to maxNodeScore * (max + min - raw) / max. Owners are told
// apart by the UID of the first owner reference; only the feasible nodes'
// pods are counted (Kubernetes counts a zone's pods on every node). A pod
// without an owner is not spread: every node scores 0.
func scoreSpread(p *podInfo, nodes []*nodeInfo) []int64 {
	out := make([]int64, len(nodes))
	if p.owner == "" {
		return out
	}
	perZone := map[string]int64{}
	perHost := make([]int64, len(nodes))
	for i, n := range nodes {
		perHost[i] = int64(n.owners[p.owner])
		if z, ok := n.node.Labels[api.LabelTopologyZone]; ok {
			perZone[z] += perHost[i]
		}
	}
	hostWeight := math.Log(float64(len(nodes) + 2))
	zoneWeight := math.Log(float64(len(perZone) + 2))
	minRaw, maxRaw := int64(math.MaxInt64), int64(0)
	for i, n := range nodes {
		s := float64(perHost[i])*hostWeight + maxSkewHost - 1
		if z, ok := n.node.Labels[api.LabelTopologyZone]; ok {
			s += float64(perZone[z])*zoneWeight + maxSkewZone - 1
		}
		out[i] = int64(math.Round(s))
		minRaw, maxRaw = min(minRaw, out[i]), max(maxRaw, out[i])
	}
	for i := range out {
		if maxRaw == 0 {
			out[i] = maxNodeScore
		} else {
			out[i] = maxNodeScore * (maxRaw + minRaw - out[i]) / maxRaw
		}
	}
	return out
}

// scoreNodes returns each feasible node's weighted total.
func scoreNodes(p *podInfo, nodes []*nodeInfo) []int64 {
	total := make([]int64, len(nodes))
	for _, s := range scorers {
		for i, v := range s.fn(p, nodes) {
			total[i] += s.weight * v
		}
	}
	return total
}

// pickNode returns the index of a node with the highest total. Among
// ties kube-scheduler picks at random
// (k8s@v1.37.2:pkg/scheduler/schedule_one.go selectHost); here the pick
// is a hash of seed and the pod's key and UID, so that it is the same in
// every run with one seed, and differs from pod to pod.
func pickNode(total []int64, seed uint64, podKey, uid string) int {
	best := int64(math.MinInt64)
	var ties []int
	for i, t := range total {
		switch {
		case t > best:
			best, ties = t, append(ties[:0], i)
		case t == best:
			ties = append(ties, i)
		}
	}
	if len(ties) == 0 {
		return -1
	}
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(podKey))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(uid))
	return ties[h.Sum64()%uint64(len(ties))]
}
