package api

import (
	"time"

	"github.com/converge-go/converge/object"
)

// Pod is one or more processes that run together on one node. The
// replicaset controller creates it, the scheduler binds it (sets
// Spec.NodeName), the node agent of that node runs it and writes Status.
type Pod struct {
	Metadata `json:"metadata"`
	Spec     PodSpec   `json:"spec"`
	Status   PodStatus `json:"status,omitzero"`
}

// PodSpec says what runs and where.
type PodSpec struct {
	Containers []Container `json:"containers"`
	// RestartPolicy is Always (the default), OnFailure or Never.
	RestartPolicy string `json:"restartPolicy,omitempty"`
	// NodeName is set by the scheduler's bind (or by the user, which
	// skips the scheduler).
	NodeName    string       `json:"nodeName,omitempty"`
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// TerminationGracePeriodSeconds is how long a stopping container gets
	// between SIGTERM and SIGKILL; nil means 30.
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// Restart policies.
const (
	RestartAlways    = "Always"
	RestartOnFailure = "OnFailure"
	RestartNever     = "Never"
)

// Container is one process of a pod.
type Container struct {
	Name string `json:"name"`
	// Command is the program and its arguments. A first word of "cluster"
	// runs the example's own binary (its worker mode); any other is looked
	// up in PATH.
	Command        []string             `json:"command"`
	Resources      ResourceRequirements `json:"resources,omitzero"`
	Ports          []ContainerPort      `json:"ports,omitempty"`
	ReadinessProbe *Probe               `json:"readinessProbe,omitempty"`
}

// ResourceRequirements holds what a container asks the scheduler for.
type ResourceRequirements struct {
	Requests ResourceList `json:"requests,omitempty"`
}

// ContainerPort is a port a container listens on. A HostPort may be
// taken by one pod per node (the scheduler's NodePorts filter).
type ContainerPort struct {
	ContainerPort int32 `json:"containerPort"`
	HostPort      int32 `json:"hostPort,omitempty"`
}

// Probe tells the node agent when a running container is ready. The
// example's probe is a command that must exit 0.
type Probe struct {
	Exec                *ExecAction `json:"exec,omitempty"`
	InitialDelaySeconds int32       `json:"initialDelaySeconds,omitempty"`
	PeriodSeconds       int32       `json:"periodSeconds,omitempty"`
}

// ExecAction is a command run for a probe.
type ExecAction struct {
	Command []string `json:"command"`
}

// Toleration lets a pod be scheduled on, or stay on, a node with a
// matching taint. An empty Key with Operator Exists tolerates every taint.
type Toleration struct {
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	// Effect is empty (every effect), NoSchedule, PreferNoSchedule or
	// NoExecute.
	Effect string `json:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated;
	// nil means forever.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Pod phases, as Kubernetes has them.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
	PodUnknown   = "Unknown"
)

// PodStatus is what the node agent (and, for eviction, the node lifecycle
// controller) observed.
type PodStatus struct {
	Phase string `json:"phase,omitempty"`
	// Conditions: PodScheduled (the scheduler; False with reason
	// Unschedulable while no node fits), Ready (the agent).
	Conditions        []object.Condition `json:"conditions,omitempty"`
	Reason            string             `json:"reason,omitempty"`
	Message           string             `json:"message,omitempty"`
	StartTime         time.Time          `json:"startTime,omitzero"`
	ContainerStatuses []ContainerStatus  `json:"containerStatuses,omitempty"`
}

// Pod condition types.
const (
	PodScheduled = "PodScheduled"
	PodReady     = "Ready"
	// ReasonUnschedulable is PodScheduled=False's reason while no node
	// fits the pod.
	ReasonUnschedulable = "Unschedulable"
)

// IsReady reports whether the pod's Ready condition is True.
func (p *Pod) IsReady() bool { return object.IsTrue(p.Status.Conditions, PodReady) }

// ContainerStatus is the node agent's view of one container.
type ContainerStatus struct {
	Name         string         `json:"name"`
	Ready        bool           `json:"ready"`
	RestartCount int32          `json:"restartCount"`
	State        ContainerState `json:"state,omitzero"`
	LastState    ContainerState `json:"lastTerminationState,omitzero"`
	// PID is the running process's (an addition of this example, so that
	// a demo can kill it).
	PID int `json:"pid,omitempty"`
}

// ContainerState is one of Waiting, Running or Terminated.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting says why a container does not run; Reason
// CrashLoopBackOff while it waits out a restart back-off.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning says since when a container runs.
type ContainerStateRunning struct {
	StartedAt time.Time `json:"startedAt"`
}

// ContainerStateTerminated says how a container's process ended.
type ContainerStateTerminated struct {
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// ReasonCrashLoopBackOff is a waiting container's reason while it backs off
// between restarts.
const ReasonCrashLoopBackOff = "CrashLoopBackOff"
