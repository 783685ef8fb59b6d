package queue

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/internal/workqueue"
)

// Metrics are the workqueue_* metrics of one queue name, registered once and
// fed by the queue, or the succession of queues, made WithMetrics(m). They
// use the names, help texts and labels of controller-runtime's workqueue
// metrics, so existing dashboards and alerts work unchanged and the metrics
// can share a registry with controller-runtime's own (see NewMetrics).
//
// A controller builds a new queue for every leadership term; with one
// Metrics for the controller, the counters and histograms (adds, retries,
// queue and work durations) keep counting across terms instead of starting
// again from zero, and no registration can fail at the start of a term.
// When a queue is made on m, the queues before it that have been shut down
// are folded into m's totals and forgotten; observations they make after
// that (a Done after the next queue started) are not counted. The gauges
// (depth, unfinished work, longest running processor) are read from the
// queues: depth from those not shut down, the in-flight gauges from all
// that m still reads, so that a reconcile still running after ShutDown
// shows.
//
// Several live queues may report into one Metrics; their values add up.
// A Metrics is safe for concurrent use.
type Metrics struct{ e *workqueue.Metrics }

// NewMetrics registers the workqueue_* metrics of the queue called name on
// reg and returns them, for WithMetrics. Every series carries name and
// controller as labels (controller-runtime names a controller's queue after
// the controller, and sets both); workqueue_depth is split by priority.
//
// It returns an error, never panics, when reg is nil or name is empty, and,
// when reg can also be gathered (a *prometheus.Registry can), when reg
// already holds these series (a Metrics, or a controller-runtime queue, with
// the same name and controller) or workqueue_* series with other labels or
// help texts (client-go's component-base metrics, an older converge). A
// registerer that cannot be gathered is not checked: a clash then shows as
// an error when it is scraped.
//
// The metrics share a registry with controller-runtime's own
// (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), which declares the
// same families. That is why they are registered as an unchecked collector
// (its Describe sends nothing), and why NewMetrics checks by gathering.
func NewMetrics(reg prometheus.Registerer, name, controller string) (*Metrics, error) {
	m, err := workqueue.NewMetrics(reg, name, controller)
	if err != nil {
		return nil, err
	}
	return &Metrics{m}, nil
}

// Unregister stops m's metrics from being reported, so that a new Metrics
// may take its labels; it reports whether they were registered. Queues may
// go on reporting into m; nobody reads it. (The registry keeps m's
// collector, which reports nothing: an unchecked collector cannot be
// removed from a prometheus.Registry.)
func (m *Metrics) Unregister() bool { return m.e.Unregister() }
