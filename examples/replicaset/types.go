package main

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/converge-go/converge/object"
)

// ReplicaSet is the desired state a user writes, and the status the
// controller writes back. Spec belongs to the user; Generation is kept by
// informer's write helpers, because ReplicaSet is an object.SpecObject: they
// bump it whenever Spec changes, as the Kubernetes API server does. Status
// belongs to the controller, which writes it with compare-and-swap and never
// touches Spec or Generation, so a status write does not bump Generation.
// The key in the store is the name.
//
// object.Meta (embedded: its generation, finalizers and deletionRequested
// fields are inline in the JSON) is what informer.Update and
// informer.RequestDelete read: the controller's finalizer keeps a deleted
// ReplicaSet in the store until its pods are gone, even if the controller
// was down when it was deleted.
type ReplicaSet struct {
	object.Meta
	Spec   ReplicaSetSpec   `json:"spec"`
	Status ReplicaSetStatus `json:"status,omitzero"`
}

// ObjectSpec makes ReplicaSet an object.SpecObject.
func (rs *ReplicaSet) ObjectSpec() any { return rs.Spec }

// ReplicaSetSpec is what the user asks for: Replicas copies of Command.
type ReplicaSetSpec struct {
	Replicas int `json:"replicas"`
	// Command is the program and its arguments. A first word of
	// "replicaset" runs this program's own binary, so that
	// ["replicaset", "worker", "--crash-after", "1s"] needs nothing else;
	// any other first word is looked up in PATH.
	Command []string `json:"command"`
}

// ReplicaSetStatus is what the controller observed.
type ReplicaSetStatus struct {
	// Replicas counts the pods that exist; ReadyReplicas those running.
	Replicas      int `json:"replicas"`
	ReadyReplicas int `json:"readyReplicas"`
	// ObservedGeneration is the Generation the controller last acted on.
	ObservedGeneration int64              `json:"observedGeneration"`
	Conditions         []object.Condition `json:"conditions,omitempty"`
}

// Condition types of a ReplicaSet.
const (
	// CondReady is True when every wanted replica is running.
	CondReady = "Ready"
	// CondReplicaFailure is True when a pod cannot run: its command does
	// not exist, or it keeps crashing.
	CondReplicaFailure = "ReplicaFailure"
)

// Reasons, in conditions and pod statuses.
const (
	ReasonAllReady         = "AllReplicasReady"
	ReasonScaling          = "Scaling"
	ReasonPodsNotReady     = "PodsNotReady"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonInvalidCommand   = "InvalidCommand"
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonNoFailures       = "NoFailures"
)

// Pod is one replica: created and deleted by the ReplicaSet controller
// (Spec never changes after creation), run by the node agent of Spec.Node,
// which writes Status.
type Pod struct {
	Spec   PodSpec   `json:"spec"`
	Status PodStatus `json:"status,omitzero"`
}

// PodSpec says which ReplicaSet owns the pod, which node runs it, and what.
type PodSpec struct {
	Owner     string    `json:"owner"`
	Node      string    `json:"node"`
	Command   []string  `json:"command"`
	CreatedAt time.Time `json:"createdAt"`
}

// Pod phases.
const (
	PhasePending = "Pending" // no process yet
	PhaseRunning = "Running" // the process runs
	PhaseWaiting = "Waiting" // the process exited; restarting after a back-off
	PhaseFailed  = "Failed"  // the process cannot be started (InvalidCommand)
)

// PodStatus is what the node agent observed of the pod's process.
type PodStatus struct {
	Phase   string `json:"phase,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// PID is the running process's, and StartedAt when it started.
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// RestartCount counts restarts of the process since the pod started.
	RestartCount int `json:"restartCount"`
	// LastExit says how the previous process ended ("exit status 3",
	// "signal: killed").
	LastExit string `json:"lastExit,omitempty"`
	// BackOff is the current restart delay ("400ms"), and NextRestartAt
	// when the process restarts, while Phase is Waiting.
	BackOff       string    `json:"backOff,omitempty"`
	NextRestartAt time.Time `json:"nextRestartAt,omitzero"`
}

// Ready reports whether the pod's process is running.
func (p Pod) Ready() bool { return p.Status.Phase == PhaseRunning }

// sameJSON reports whether a and b encode to the same JSON: the form they
// are stored in, so times compare by instant and nil equals empty.
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
