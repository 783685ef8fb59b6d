package api

import (
	"github.com/converge-go/converge/object"
)

// Deployment keeps a set of identical pods running through ReplicaSets, one
// per version of its pod template, and rolls from one version to the next
// (Kubernetes: pkg/controller/deployment).
type Deployment struct {
	Metadata `json:"metadata"`
	Spec     DeploymentSpec   `json:"spec"`
	Status   DeploymentStatus `json:"status,omitzero"`
}

// ObjectSpec makes Deployment an object.SpecObject: a spec change bumps
// its generation, a status write does not.
func (d *Deployment) ObjectSpec() any { return d.Spec }

// DeploymentSpec is what the user asks for.
type DeploymentSpec struct {
	// Replicas is the number of pods wanted; nil means 1.
	Replicas *int32             `json:"replicas,omitempty"`
	Selector LabelSelector      `json:"selector"`
	Template PodTemplateSpec    `json:"template"`
	Strategy DeploymentStrategy `json:"strategy,omitzero"`
	// MinReadySeconds is how long a new pod must be ready before it counts
	// as available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// RevisionHistoryLimit is how many old ReplicaSets (scaled to zero)
	// are kept for rollback; nil means 10.
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// ProgressDeadlineSeconds is how long a rollout may go without
	// progress before it is reported as ProgressDeadlineExceeded; nil
	// means 600.
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	Paused                  bool   `json:"paused,omitempty"`
}

// Deployment strategy types.
const (
	RollingUpdateStrategy = "RollingUpdate"
	RecreateStrategy      = "Recreate"
)

// DeploymentStrategy says how old pods are replaced by new ones. The zero
// value is a rolling update with 25% surge and 25% unavailable.
type DeploymentStrategy struct {
	Type          string                   `json:"type,omitempty"`
	RollingUpdate *RollingUpdateDeployment `json:"rollingUpdate,omitempty"`
}

// RollingUpdateDeployment bounds a rolling update. Each bound is an
// absolute number ("1") or a percentage of the replicas ("25%"); surge
// rounds up and unavailable rounds down, and they may not both be zero.
type RollingUpdateDeployment struct {
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	MaxSurge       string `json:"maxSurge,omitempty"`
}

// DeploymentStatus is what the deployment controller observed.
type DeploymentStatus struct {
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	Replicas            int32              `json:"replicas"`
	UpdatedReplicas     int32              `json:"updatedReplicas"`
	ReadyReplicas       int32              `json:"readyReplicas"`
	AvailableReplicas   int32              `json:"availableReplicas"`
	UnavailableReplicas int32              `json:"unavailableReplicas"`
	Conditions          []object.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of a Deployment, as Kubernetes names them.
const (
	DeploymentAvailable   = "Available"
	DeploymentProgressing = "Progressing"

	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	ReasonFoundNewReplicaSet         = "FoundNewReplicaSet"
	ReasonReplicaSetUpdated          = "ReplicaSetUpdated"
	ReasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	ReasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	ReasonDeploymentPaused           = "DeploymentPaused"
	ReasonDeploymentResumed          = "DeploymentResumed"
)

// Labels and annotations the deployment controller writes.
const (
	// PodTemplateHashLabel names a ReplicaSet's template version; it is in
	// the ReplicaSet's name, selector and pod labels.
	PodTemplateHashLabel = "pod-template-hash"
	// RevisionAnnotation numbers the versions of a Deployment's template;
	// rollout undo goes back to the ReplicaSet of a revision.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// DesiredReplicasAnnotation and MaxReplicasAnnotation record on a
	// ReplicaSet the Deployment's replicas and replicas+maxSurge it was
	// last scaled for (proportional scaling reads them).
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
)

// ReplicaSet keeps Replicas pods matching its selector alive (Kubernetes:
// pkg/controller/replicaset).
type ReplicaSet struct {
	Metadata `json:"metadata"`
	Spec     ReplicaSetSpec   `json:"spec"`
	Status   ReplicaSetStatus `json:"status,omitzero"`
}

// ObjectSpec makes ReplicaSet an object.SpecObject.
func (rs *ReplicaSet) ObjectSpec() any { return rs.Spec }

// ReplicaSetSpec is what the user or a Deployment asks for.
type ReplicaSetSpec struct {
	// Replicas is the number of pods wanted; nil means 1.
	Replicas        *int32          `json:"replicas,omitempty"`
	MinReadySeconds int32           `json:"minReadySeconds,omitempty"`
	Selector        LabelSelector   `json:"selector"`
	Template        PodTemplateSpec `json:"template"`
}

// ReplicaSetStatus is what the replicaset controller observed.
type ReplicaSetStatus struct {
	Replicas             int32              `json:"replicas"`
	FullyLabeledReplicas int32              `json:"fullyLabeledReplicas,omitempty"`
	ReadyReplicas        int32              `json:"readyReplicas"`
	AvailableReplicas    int32              `json:"availableReplicas"`
	ObservedGeneration   int64              `json:"observedGeneration,omitempty"`
	Conditions           []object.Condition `json:"conditions,omitempty"`
}

// ReplicaSetReplicaFailure is the condition a ReplicaSet gets when it
// cannot create or delete pods.
const ReplicaSetReplicaFailure = "ReplicaFailure"

// PodTemplateSpec is the pod a Deployment or ReplicaSet makes copies of.
type PodTemplateSpec struct {
	Metadata TemplateMeta `json:"metadata,omitzero"`
	Spec     PodSpec      `json:"spec"`
}

// TemplateMeta is the part of a pod's metadata a template sets.
type TemplateMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Replicas returns *p, or 1 if p is nil (the API's default).
func Replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
