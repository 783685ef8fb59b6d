package api

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
)

// Stores are the stores of every kind, each keyed as ObjectMeta.Key says.
// In the control plane they are the stores it serves; in a node agent or
// the CLI, httpstore clients of the control plane.
type Stores struct {
	Deployments informer.Store[string, Deployment]
	ReplicaSets informer.Store[string, ReplicaSet]
	Pods        informer.Store[string, Pod]
	Nodes       informer.Store[string, Node]
	Leases      informer.Store[string, Lease]
	// Events holds the events the controllers and agents record, keyed
	// as events.StoreSink keys them.
	Events informer.Store[string, events.Event]
}

// Informers are the control plane's shared caches, one per kind, which
// every controller reads and watches. Each controller adds the indexes it
// needs (informer.AddIndex, reconcile.Owns) when it is added.
type Informers struct {
	Deployments *informer.Informer[string, Deployment]
	ReplicaSets *informer.Informer[string, ReplicaSet]
	Pods        *informer.Informer[string, Pod]
	Nodes       *informer.Informer[string, Node]
	Leases      *informer.Informer[string, Lease]
}

// Cluster is what a controller of the control plane is added with. Each
// controller's package has
//
//	func Add(m *reconcile.Manager, c *api.Cluster) error
//
// which builds the controller on c's informers and stores and adds it to m.
type Cluster struct {
	Stores    Stores
	Informers Informers
	Timings   Timings
	// Clock is the control plane's clock: a fake one in simulations.
	Clock clock.WithTicker
	// Recorder returns the event recorder of a component ("deployment-
	// controller", "default-scheduler"): its events go to Stores.Events,
	// where describe reads them. It is called once per component, when the
	// component is added.
	Recorder func(component string) *events.Recorder
	Logger   *slog.Logger
}

// Timings are the intervals of the cluster's loops. KubeTimings are
// Kubernetes' own defaults; FastTimings scale them down so a demo runs in
// about a minute.
type Timings struct {
	// LeaseDuration is a node lease's duration; the agent renews it every
	// LeaseRenewInterval (kubelet: 40 s and a quarter of it).
	LeaseDuration      time.Duration
	LeaseRenewInterval time.Duration
	// NodeMonitorPeriod is how often the node lifecycle controller checks
	// the leases; a node whose lease was not renewed for
	// NodeMonitorGracePeriod becomes Ready=Unknown and is tainted.
	NodeMonitorPeriod      time.Duration
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod is the grace a new node gets before its first
	// heartbeat.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate is how many nodes a second get their NoExecute
	// taint in a healthy zone; SecondaryNodeEvictionRate in an unhealthy
	// one (UnhealthyZoneThreshold of its nodes not ready); none in an
	// unhealthy zone of at most LargeClusterSizeThreshold nodes.
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	// DefaultTolerationSeconds is the not-ready/unreachable toleration
	// every pod gets unless it sets its own: how long its pods stay on a
	// lost node.
	DefaultTolerationSeconds int64
	// CrashBackOff and CrashBackOffMax bound a container's restart delay,
	// doubling from the first to the second.
	CrashBackOff    time.Duration
	CrashBackOffMax time.Duration
	// SchedulerBackOff and SchedulerBackOffMax bound an unschedulable
	// pod's retry delay, doubling.
	SchedulerBackOff    time.Duration
	SchedulerBackOffMax time.Duration
}

// KubeTimings returns Kubernetes' defaults (kubelet, kube-controller-manager
// and kube-scheduler of v1.37): about six minutes from a node's death to its
// pods running elsewhere.
func KubeTimings() Timings {
	return Timings{
		LeaseDuration:             40 * time.Second,
		LeaseRenewInterval:        10 * time.Second,
		NodeMonitorPeriod:         5 * time.Second,
		NodeMonitorGracePeriod:    50 * time.Second,
		NodeStartupGracePeriod:    60 * time.Second,
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0.01,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
		DefaultTolerationSeconds:  300,
		CrashBackOff:              10 * time.Second,
		CrashBackOffMax:           300 * time.Second,
		SchedulerBackOff:          time.Second,
		SchedulerBackOffMax:       10 * time.Second,
	}
}

// FastTimings returns the demo's timings: the same rules, about fifty times
// quicker (a lost node's pods run elsewhere after about fifteen seconds).
func FastTimings() Timings {
	return Timings{
		LeaseDuration:             4 * time.Second,
		LeaseRenewInterval:        time.Second,
		NodeMonitorPeriod:         500 * time.Millisecond,
		NodeMonitorGracePeriod:    5 * time.Second,
		NodeStartupGracePeriod:    6 * time.Second,
		NodeEvictionRate:          1,
		SecondaryNodeEvictionRate: 0.1,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
		DefaultTolerationSeconds:  10,
		CrashBackOff:              200 * time.Millisecond,
		CrashBackOffMax:           5 * time.Second,
		SchedulerBackOff:          100 * time.Millisecond,
		SchedulerBackOffMax:       time.Second,
	}
}
