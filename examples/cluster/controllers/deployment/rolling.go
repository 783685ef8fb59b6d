package deployment

import (
	"slices"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
)

// rolloutRolling takes one step of a rolling update: grow the new
// ReplicaSet if the surge allows, else shrink old ones if availability
// allows, else clean up the history once complete (rolling.go
// rolloutRolling).
func (s *pass) rolloutRolling() (api.DeploymentStatus, time.Duration, error) {
	newRS, old, err := s.newReplicaSet(true)
	if err != nil {
		return api.DeploymentStatus{}, 0, err
	}
	all := append(slices.Clip(old), newRS)
	scaledUp, err := s.reconcileNewReplicaSet(all, newRS)
	if err != nil {
		return api.DeploymentStatus{}, 0, err
	}
	if !scaledUp {
		scaledDown, err := s.reconcileOldReplicaSets(all, activeRSs(old), newRS)
		if err != nil {
			return api.DeploymentStatus{}, 0, err
		}
		if !scaledDown && deploymentComplete(s.d, &s.d.Status) {
			if err := s.cleanup(old); err != nil {
				return api.DeploymentStatus{}, 0, err
			}
		}
	}
	st, requeue := s.syncRolloutStatus(all, newRS)
	return st, requeue, nil
}

// reconcileNewReplicaSet grows (or, above the replicas, shrinks) the new
// ReplicaSet as far as maxSurge allows.
func (s *pass) reconcileNewReplicaSet(all []*api.ReplicaSet, newRS *api.ReplicaSet) (bool, error) {
	replicas := api.Replicas(s.d.Spec.Replicas)
	switch have := api.Replicas(newRS.Spec.Replicas); {
	case have == replicas:
		return false, nil
	case have > replicas:
		return s.scaleRS(newRS, replicas, false)
	}
	return s.scaleRS(newRS, s.newRSNewReplicas(all, newRS), false)
}

// newRSNewReplicas is the new ReplicaSet's size for the next step
// (deployment_util.go NewRSNewReplicas): as many more as keep the pods
// within replicas+maxSurge, up to the replicas; all of them for Recreate.
func (s *pass) newRSNewReplicas(all []*api.ReplicaSet, newRS *api.ReplicaSet) int32 {
	replicas := api.Replicas(s.d.Spec.Replicas)
	if !isRollingUpdate(s.d) {
		return replicas
	}
	maxTotal := replicas + maxSurge(s.d)
	current := s.podCount(all)
	have := api.Replicas(newRS.Spec.Replicas)
	if current >= maxTotal {
		return have
	}
	return have + min(maxTotal-current, replicas-have)
}

// podCount bounds the pods of rss from above: for each, the largest of
// its replicas, the pods its status counted, and its active pods in the
// pod cache. Kubernetes counts replicas only; here pods a ReplicaSet is
// still deleting, or created after its status was written, count too, so
// that a rollout never has more than replicas+maxSurge pods at once, also
// right after a restart.
func (s *pass) podCount(rss []*api.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			active, _ := s.cachedPods(rs)
			n += max(api.Replicas(rs.Spec.Replicas), rs.Status.Replicas, active)
		}
	}
	return n
}

// cachedPods counts rs's active pods in the pod cache, and those of them
// available (ready for the Deployment's minReadySeconds).
func (s *pass) cachedPods(rs *api.ReplicaSet) (active, available int32) {
	for _, e := range s.podInf.ByIndex(indexPodsByRSUID, rs.UID) {
		if !replicaset.IsPodActive(e.Value) {
			continue
		}
		active++
		if replicaset.IsPodAvailable(e.Value, s.d.Spec.MinReadySeconds, s.now) {
			available++
		}
	}
	return active, available
}

// specCount is the sum of the ReplicaSets' replicas
// (GetReplicaCountForReplicaSets).
func specCount(rss []*api.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += api.Replicas(rs.Spec.Replicas)
		}
	}
	return n
}

// available bounds rs's available pods from below, for scaling down: the
// least of its status's count, its replicas, and its available pods in the
// pod cache. Kubernetes takes the status's count; but a status may still
// count pods the ReplicaSet is deleting, or have been written before a
// scale-down (both seen after restarts on lagging caches), and scaling down
// on it would leave fewer than replicas−maxUnavailable available.
func (s *pass) available(rs *api.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	_, cached := s.cachedPods(rs)
	return min(rs.Status.AvailableReplicas, api.Replicas(rs.Spec.Replicas), cached)
}

// availableAtMost bounds rs's available pods from above: the larger of its
// status's and the pod cache's count, at most its replicas. Scaling a
// ReplicaSet down by its replicas minus this takes away only pods that are
// not available (the ReplicaSet deletes those first), even when a pod
// became ready after the status was written.
func (s *pass) availableAtMost(rs *api.ReplicaSet) int32 {
	_, cached := s.cachedPods(rs)
	return min(api.Replicas(rs.Spec.Replicas), max(rs.Status.AvailableReplicas, cached))
}

func (s *pass) availableCount(rss []*api.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += s.available(rs)
	}
	return n
}

// reconcileOldReplicaSets shrinks the old ReplicaSets as far as keeps
// replicas−maxUnavailable available, unhealthy pods first (rolling.go
// reconcileOldReplicaSets, with its worked example).
func (s *pass) reconcileOldReplicaSets(all, old []*api.ReplicaSet, newRS *api.ReplicaSet) (bool, error) {
	if specCount(old) == 0 {
		return false, nil
	}
	minAvailable := api.Replicas(s.d.Spec.Replicas) - maxUnavailable(s.d)
	newUnavailable := api.Replicas(newRS.Spec.Replicas) - s.available(newRS)
	maxScaledDown := specCount(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	sortByCreation(old)
	cleaned, err := s.cleanupUnhealthyReplicas(old, maxScaledDown)
	if err != nil {
		return false, err
	}
	scaled, err := s.scaleDownOldForRollingUpdate(append(slices.Clip(old), newRS), old)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthyReplicas takes the old ReplicaSets' unavailable pods
// away first, up to limit: removing them costs no availability.
func (s *pass) cleanupUnhealthyReplicas(old []*api.ReplicaSet, limit int32) (int32, error) {
	var total int32
	for _, rs := range old {
		if total >= limit {
			break
		}
		have := api.Replicas(rs.Spec.Replicas)
		if have == 0 || have == s.availableAtMost(rs) {
			continue
		}
		n := min(limit-total, have-s.availableAtMost(rs))
		if _, err := s.scaleRS(rs, have-n, false); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// scaleDownOldForRollingUpdate shrinks the old ReplicaSets, oldest first,
// by as many pods as are available above replicas−maxUnavailable.
func (s *pass) scaleDownOldForRollingUpdate(all, old []*api.ReplicaSet) (int32, error) {
	minAvailable := api.Replicas(s.d.Spec.Replicas) - maxUnavailable(s.d)
	available := s.availableCount(all)
	if available <= minAvailable {
		return 0, nil
	}
	want := available - minAvailable
	var total int32
	for _, rs := range old {
		if total >= want {
			break
		}
		have := api.Replicas(rs.Spec.Replicas)
		if have == 0 {
			continue
		}
		n := min(have, want-total)
		if _, err := s.scaleRS(rs, have-n, false); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// rolloutRecreate scales the old ReplicaSets to zero, waits until none of
// their pods runs, then creates and grows the new one (recreate.go).
func (s *pass) rolloutRecreate() (api.DeploymentStatus, time.Duration, error) {
	newRS, old, err := s.newReplicaSet(false)
	if err != nil {
		return api.DeploymentStatus{}, 0, err
	}
	all := append(slices.Clip(old), newRS)
	scaledDown := false
	for _, rs := range activeRSs(old) {
		ok, err := s.scaleRS(rs, 0, false)
		if err != nil {
			return api.DeploymentStatus{}, 0, err
		}
		scaledDown = scaledDown || ok
	}
	if scaledDown || s.oldPodsRunning(newRS, old) {
		st, requeue := s.syncRolloutStatus(all, newRS)
		return st, requeue, nil
	}
	if newRS == nil {
		if newRS, old, err = s.newReplicaSet(true); err != nil {
			return api.DeploymentStatus{}, 0, err
		}
		all = append(slices.Clip(old), newRS)
	}
	if _, err := s.scaleRS(newRS, api.Replicas(s.d.Spec.Replicas), false); err != nil {
		return api.DeploymentStatus{}, 0, err
	}
	if deploymentComplete(s.d, &s.d.Status) {
		if err := s.cleanup(old); err != nil {
			return api.DeploymentStatus{}, 0, err
		}
	}
	st, requeue := s.syncRolloutStatus(all, newRS)
	return st, requeue, nil
}

// oldPodsRunning: an old ReplicaSet still counts pods, or a pod of one has
// not ended (recreate.go oldPodsRunning).
func (s *pass) oldPodsRunning(newRS *api.ReplicaSet, old []*api.ReplicaSet) bool {
	var actual int32
	for _, rs := range old {
		actual += rs.Status.Replicas
	}
	if actual > 0 {
		return true
	}
	for _, rs := range old {
		for _, e := range s.podInf.ByIndex(indexPodsByRSUID, rs.UID) {
			if newRS != nil && rs.UID == newRS.UID {
				continue
			}
			if ph := e.Value.Status.Phase; ph != api.PodSucceeded && ph != api.PodFailed {
				return true
			}
		}
	}
	return false
}
