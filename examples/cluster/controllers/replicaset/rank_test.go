package replicaset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pod builds a pod for the ranking: node "" is unassigned; readyFor < 0 is
// not ready.
func pod(uid, node, phase string, readyFor time.Duration, restarts int32, age time.Duration) api.Pod {
	p := api.Pod{}
	p.UID, p.Spec.NodeName, p.Status.Phase = uid, node, phase
	p.CreationTimestamp = t0.Add(-age)
	if readyFor >= 0 {
		p.Status.Conditions = []object.Condition{{Type: api.PodReady, Status: object.ConditionTrue, LastTransitionTime: t0.Add(-readyFor)}}
	}
	p.Status.ContainerStatuses = []api.ContainerStatus{{Name: "c", RestartCount: restarts}}
	return p
}

func TestThePodToDeleteFirstShouldBeChosenByKubernetesRanking(t *testing.T) {
	const notReady = -1
	hour := time.Hour
	for _, tc := range []struct {
		name        string
		first, then api.Pod
	}{
		{"unassigned before assigned",
			pod("a", "", api.PodRunning, notReady, 0, hour), pod("b", "n1", api.PodPending, notReady, 0, hour)},
		{"Pending before Unknown",
			pod("a", "n1", api.PodPending, notReady, 0, hour), pod("b", "n1", api.PodUnknown, notReady, 0, hour)},
		{"Unknown before Running",
			pod("a", "n1", api.PodUnknown, notReady, 0, hour), pod("b", "n1", api.PodRunning, notReady, 0, hour)},
		{"not ready before ready",
			pod("a", "n1", api.PodRunning, notReady, 0, hour), pod("b", "n1", api.PodRunning, hour, 0, hour)},
		{"ready for less time before ready for longer",
			pod("a", "n1", api.PodRunning, time.Minute, 0, hour), pod("b", "n1", api.PodRunning, 30*time.Minute, 0, hour)},
		{"more restarts before fewer",
			pod("a", "n1", api.PodRunning, notReady, 5, hour), pod("b", "n1", api.PodRunning, notReady, 1, hour)},
		{"newer before older",
			pod("a", "n1", api.PodRunning, notReady, 0, time.Minute), pod("b", "n1", api.PodRunning, notReady, 0, hour)},
		{"ready times in the same power of two: then restarts decide",
			pod("a", "n1", api.PodRunning, 40*time.Minute, 3, hour), pod("b", "n1", api.PodRunning, 41*time.Minute, 0, hour)},
		{"ages in the same power of two: then the UID decides",
			pod("a", "n1", api.PodRunning, notReady, 0, hour+time.Minute), pod("b", "n1", api.PodRunning, notReady, 0, hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]api.Pod{{tc.first, tc.then}, {tc.then, tc.first}} {
				got := PodsToDelete(order, nil, 1, t0)
				assert.Equal(t, tc.first.UID, order[got[0]].UID)
			}
		})
	}
}

func TestAPodDoubledUpOnANodeShouldBeDeletedBeforeOneAlone(t *testing.T) {
	alone := pod("alone", "n1", api.PodRunning, time.Hour, 0, time.Hour)
	doubled := pod("doubled", "n2", api.PodRunning, 2*time.Hour, 0, 2*time.Hour)
	sibling := pod("sibling", "n2", api.PodRunning, 2*time.Hour, 0, 2*time.Hour)
	pods := []api.Pod{alone, doubled}
	got := PodsToDelete(pods, []api.Pod{alone, doubled, sibling}, 1, t0)
	assert.Equal(t, "doubled", pods[got[0]].UID, "older, but it shares n2 with a sibling")
}

func TestPodsToDeleteShouldReturnEveryPodWhenAllGo(t *testing.T) {
	pods := []api.Pod{pod("a", "n1", api.PodRunning, 0, 0, 0), pod("b", "", "", -1, 0, 0)}
	assert.ElementsMatch(t, []int{0, 1}, PodsToDelete(pods, pods, 5, t0))
}
