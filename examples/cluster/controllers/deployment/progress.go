package deployment

import (
	"fmt"
	"slices"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/object"
)

// Condition conventions: Kubernetes' Progressing condition has a
// lastUpdateTime, moved at every sign of progress, from which the
// deadline runs; converge's conditions have one time only. Here the
// Progressing condition's LastTransitionTime is that time: it is set
// afresh whenever Kubernetes would update the condition, not only when its
// status flips.

// setProgressing sets d's Progressing condition, unless it holds already
// with this status and reason (deployment_util.go SetDeploymentCondition);
// its time is now.
func (s *pass) setProgressing(status object.ConditionStatus, reason, msg string) {
	setProgressing(&s.d.Status.Conditions, status, reason, msg, s.now, s.d.Generation, false)
}

// setProgressing puts a Progressing condition in conds at now; refresh
// replaces one of the same status and reason too (a rollout that made
// progress restarts its deadline).
func setProgressing(conds *[]object.Condition, status object.ConditionStatus, reason, msg string, now time.Time, gen int64, refresh bool) {
	if c, ok := object.FindCondition(*conds, api.DeploymentProgressing); ok && c.Status == status && c.Reason == reason && !refresh {
		return
	}
	object.RemoveCondition(conds, api.DeploymentProgressing)
	object.SetCondition(conds, object.Condition{Type: api.DeploymentProgressing, Status: status, Reason: reason,
		Message: msg, LastTransitionTime: now, ObservedGeneration: gen}, now)
}

// checkPausedConditions marks a paused Deployment's Progressing condition
// Unknown, and a resumed one's likewise, so that the time spent paused
// does not count against the deadline (sync.go checkPausedConditions).
func (s *pass) checkPausedConditions() {
	c, ok := object.FindCondition(s.d.Status.Conditions, api.DeploymentProgressing)
	if ok && c.Reason == api.ReasonProgressDeadlineExceeded {
		return
	}
	pausedCond := ok && c.Reason == api.ReasonDeploymentPaused
	switch {
	case s.d.Spec.Paused && !pausedCond:
		s.setProgressing(object.ConditionUnknown, api.ReasonDeploymentPaused, "Deployment is paused")
	case !s.d.Spec.Paused && pausedCond:
		s.setProgressing(object.ConditionUnknown, api.ReasonDeploymentResumed, "Deployment is resumed")
	}
}

// calculateStatus is d's status from its ReplicaSets (sync.go
// calculateStatus), with the Available condition.
func (s *pass) calculateStatus(all []*api.ReplicaSet, newRS *api.ReplicaSet) api.DeploymentStatus {
	d := s.d
	st := api.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Conditions:         slices.Clone(d.Status.Conditions),
	}
	var total int32
	for _, rs := range all {
		if rs == nil {
			continue
		}
		total += api.Replicas(rs.Spec.Replicas)
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(0, total-st.AvailableReplicas)
	avail := object.Condition{Type: api.DeploymentAvailable, Status: object.ConditionTrue,
		Reason: api.ReasonMinimumReplicasAvailable, Message: "Deployment has minimum availability.", ObservedGeneration: d.Generation}
	if st.AvailableReplicas < api.Replicas(d.Spec.Replicas)-maxUnavailable(d) {
		avail.Status, avail.Reason, avail.Message = object.ConditionFalse, api.ReasonMinimumReplicasUnavailable,
			"Deployment does not have minimum availability."
	}
	object.SetCondition(&st.Conditions, avail, s.now)
	return st
}

// deploymentComplete: every replica updated and available, no old pod
// left, the spec observed (deployment_util.go DeploymentComplete).
func deploymentComplete(d *api.Deployment, st *api.DeploymentStatus) bool {
	want := api.Replicas(d.Spec.Replicas)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want &&
		st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: the new status shows more updated, ready or
// available pods, or fewer old ones, than the last (DeploymentProgressing).
func deploymentProgressing(old, st *api.DeploymentStatus) bool {
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas || st.AvailableReplicas > old.AvailableReplicas
}

// syncRolloutStatus is d's status during a rollout with its Progressing
// condition: NewReplicaSetAvailable once complete, ReplicaSetUpdated on
// progress, ProgressDeadlineExceeded once progressDeadlineSeconds passed
// without (progress.go syncRolloutStatus); and when to look again for the
// deadline (requeueStuckDeployment).
func (s *pass) syncRolloutStatus(all []*api.ReplicaSet, newRS *api.ReplicaSet) (api.DeploymentStatus, time.Duration) {
	d := s.d
	st := s.calculateStatus(all, newRS)
	cur, hasCur := object.FindCondition(d.Status.Conditions, api.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && hasCur && cur.Reason == api.ReasonNewReplicaSetAvailable
	name := fmt.Sprintf("Deployment %q", d.Name)
	if newRS != nil {
		name = fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	if !complete {
		switch {
		case deploymentComplete(d, &st):
			setProgressing(&st.Conditions, object.ConditionTrue, api.ReasonNewReplicaSetAvailable,
				name+" has successfully progressed.", s.now, d.Generation, false)
		case deploymentProgressing(&d.Status, &st):
			setProgressing(&st.Conditions, object.ConditionTrue, api.ReasonReplicaSetUpdated,
				name+" is progressing.", s.now, d.Generation, true)
		case s.timedOut(&st):
			setProgressing(&st.Conditions, object.ConditionFalse, api.ReasonProgressDeadlineExceeded,
				name+" has timed out progressing.", s.now, d.Generation, false)
		}
	}
	s.replicaFailure(&st, all, newRS)
	return st, s.requeueStuck(&st)
}

// deadline is when d's rollout times out without progress; ok false if it
// cannot (no Progressing condition, or one that is not counting: complete,
// timed out already, or paused). A resumed Deployment's deadline counts
// from its resume, as Kubernetes' does (DeploymentTimedOut leaves out
// only the complete and the timed out; a paused one is not synced).
func (s *pass) deadline(st *api.DeploymentStatus) (time.Time, bool) {
	c, ok := object.FindCondition(st.Conditions, api.DeploymentProgressing)
	if !ok || c.Reason == api.ReasonNewReplicaSetAvailable || c.Reason == api.ReasonProgressDeadlineExceeded ||
		c.Reason == api.ReasonDeploymentPaused {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Add(time.Duration(progressDeadlineSeconds(s.d)) * time.Second), true
}

// timedOut: the last progress was progressDeadlineSeconds ago or more
// (deployment_util.go DeploymentTimedOut).
func (s *pass) timedOut(st *api.DeploymentStatus) bool {
	at, ok := s.deadline(st)
	return ok && !s.now.Before(at)
}

// requeueStuck is when to look at a rollout again for its deadline: 0
// if it is complete or over (progress.go requeueStuckDeployment).
func (s *pass) requeueStuck(st *api.DeploymentStatus) time.Duration {
	if deploymentComplete(s.d, st) {
		return 0
	}
	at, ok := s.deadline(st)
	if !ok {
		return 0
	}
	return max(at.Sub(s.now), time.Millisecond)
}

// replicaFailure copies a ReplicaFailure condition of the new ReplicaSet,
// else of an old one, to the Deployment, or removes it (getReplicaFailures).
func (s *pass) replicaFailure(st *api.DeploymentStatus, all []*api.ReplicaSet, newRS *api.ReplicaSet) {
	find := func(rs *api.ReplicaSet) (object.Condition, bool) {
		if rs == nil {
			return object.Condition{}, false
		}
		return object.FindCondition(rs.Status.Conditions, api.ReplicaSetReplicaFailure)
	}
	c, ok := find(newRS)
	for _, rs := range all {
		if ok {
			break
		}
		c, ok = find(rs)
	}
	if !ok {
		object.RemoveCondition(&st.Conditions, api.ReplicaSetReplicaFailure)
		return
	}
	object.SetCondition(&st.Conditions, c, s.now)
}
