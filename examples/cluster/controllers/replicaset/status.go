package replicaset

import (
	"slices"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// Reasons of the ReplicaFailure condition (replica_set_utils.go).
const (
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
)

// IsPodAvailable reports whether p has been ready for at least
// minReadySeconds at now (podutil.IsPodAvailable).
func IsPodAvailable(p api.Pod, minReadySeconds int32, now time.Time) bool {
	since := readySince(p)
	if since.IsZero() {
		return false
	}
	return minReadySeconds == 0 || !since.Add(time.Duration(minReadySeconds)*time.Second).After(now)
}

// nextAvailable is how long until the first of pods that is ready but not
// yet available becomes available; 0 if none is waiting.
func nextAvailable(pods []namedPod, minReadySeconds int32, now time.Time) time.Duration {
	var next time.Duration
	for _, p := range pods {
		since := readySince(p.Pod)
		if since.IsZero() || IsPodAvailable(p.Pod, minReadySeconds, now) {
			continue
		}
		if d := since.Add(time.Duration(minReadySeconds) * time.Second).Sub(now); next == 0 || d < next {
			next = d
		}
	}
	return next
}

// calculateStatus is rs's status given its active pods and the outcome of
// managing them (replica_set_utils.go calculateStatus): the ReplicaFailure
// condition is set while creates (diff < 0) or deletes fail, and removed
// once they succeed.
func calculateStatus(rs api.ReplicaSet, active []namedPod, manageErr error, diff int, now time.Time) api.ReplicaSetStatus {
	st := api.ReplicaSetStatus{
		Replicas:           int32(len(active)),
		ObservedGeneration: rs.Generation,
		Conditions:         slices.Clone(rs.Status.Conditions),
	}
	labels := api.LabelSelector{MatchLabels: rs.Spec.Template.Metadata.Labels}
	for _, p := range active {
		if len(labels.MatchLabels) == 0 || labels.Matches(p.Labels) {
			st.FullyLabeledReplicas++
		}
		if p.IsReady() {
			st.ReadyReplicas++
		}
		if IsPodAvailable(p.Pod, rs.Spec.MinReadySeconds, now) {
			st.AvailableReplicas++
		}
	}
	if manageErr != nil {
		reason := ReasonFailedDelete
		if diff < 0 {
			reason = ReasonFailedCreate
		}
		object.SetCondition(&st.Conditions, object.Condition{Type: api.ReplicaSetReplicaFailure,
			Status: object.ConditionTrue, Reason: reason, Message: manageErr.Error(),
			ObservedGeneration: rs.Generation}, now)
	} else {
		object.RemoveCondition(&st.Conditions, api.ReplicaSetReplicaFailure)
	}
	if len(st.Conditions) == 0 {
		st.Conditions = nil
	}
	return st
}
