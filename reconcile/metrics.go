package reconcile

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Result labels of controller_runtime_reconcile_total, as controller-runtime
// uses them.
const (
	labelSuccess      = "success"
	labelError        = "error"
	labelRequeue      = "requeue"
	labelRequeueAfter = "requeue_after"
)

// reconcileTimeBuckets are controller-runtime's buckets for
// controller_runtime_reconcile_time_seconds, so that dashboards computing
// quantiles from them read the same.
var reconcileTimeBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
}

// metrics is one controller's Prometheus collector: controller-runtime's
// metric names and labels, the controller label fixed to its name. It is
// registered as one collector, so that it registers, or fails, as a whole.
type metrics struct {
	success, errorResult, requeue, requeueAfter prometheus.Counter
	errors, terminal, panics                    prometheus.Counter
	duration                                    prometheus.Histogram
	active, maxWorkers                          prometheus.Gauge
	parked                                      prometheus.Gauge
	watchPanics                                 prometheus.Counter
	rywSkips, rywTimeouts                       prometheus.Counter
	rywWaiting                                  prometheus.Gauge
	cancelled                                   *prometheus.CounterVec // by cause

	all []prometheus.Collector
}

func newMetrics(name string, workers int, reg prometheus.Registerer) (*metrics, error) {
	labels := prometheus.Labels{"controller": name}
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "controller_runtime_reconcile_total",
		Help:        "Total number of reconciliations per controller",
		ConstLabels: labels,
	}, []string{"result"})
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: n, Help: help, ConstLabels: labels})
	}
	gauge := func(n, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		success:      total.WithLabelValues(labelSuccess),
		errorResult:  total.WithLabelValues(labelError),
		requeue:      total.WithLabelValues(labelRequeue),
		requeueAfter: total.WithLabelValues(labelRequeueAfter),
		errors:       counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller"),
		terminal:     counter("controller_runtime_terminal_reconcile_errors_total", "Total number of terminal reconciliation errors per controller"),
		panics:       counter("controller_runtime_reconcile_panics_total", "Total number of reconciliation panics per controller"),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "controller_runtime_reconcile_time_seconds",
			Help:        "Length of time per reconciliation per controller",
			ConstLabels: labels,
			Buckets:     reconcileTimeBuckets,
		}),
		active:     gauge("controller_runtime_active_workers", "Number of currently used workers per controller"),
		maxWorkers: gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller"),
		parked:     gauge("converge_reconcile_parked_keys", "Number of keys parked after too many failed attempts, per controller"),
		watchPanics: counter("converge_watch_panics_total",
			"Total number of panics recovered in a controller's predicates, key mappings and enqueues, per controller"),
		rywSkips: counter("converge_read_your_writes_skips_total",
			"Total number of reconciles skipped because an informer had not seen the key's earlier writes (reconcile.Wrote), per controller"),
		rywTimeouts: counter("converge_read_your_writes_timeouts_total",
			"Total number of writes recorded with reconcile.Wrote that an informer had not seen within the timeout, per controller"),
		rywWaiting: gauge("converge_read_your_writes_waiting",
			"Number of keys parked until an informer sees their earlier writes, per controller"),
		cancelled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_reconcile_cancelled_errors_total",
			Help: "Total number of errors returned by reconciles that the controller had cancelled, by cause " +
				"(changed: WithCancelOnChange, bucket_lost: WithShards, shutdown); not failures, so not in " +
				"controller_runtime_reconcile_errors_total, per controller",
			ConstLabels: labels,
		}, []string{"cause"}),
	}
	for _, cause := range []string{cancelChanged, cancelBucketLost, cancelShutdown} {
		m.cancelled.WithLabelValues(cause) // present at 0, so that rate() sees the first one
	}
	m.maxWorkers.Set(float64(workers))
	m.all = []prometheus.Collector{total, m.errors, m.terminal, m.panics, m.duration, m.active, m.maxWorkers, m.parked, m.watchPanics,
		m.rywSkips, m.rywTimeouts, m.rywWaiting, m.cancelled}
	if err := reg.Register(m); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			return nil, errors.New("already registered for a controller of this name")
		}
		return nil, err
	}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all {
		c.Collect(ch)
	}
}

func (m *metrics) result(label string) prometheus.Counter {
	switch label {
	case labelSuccess:
		return m.success
	case labelRequeue:
		return m.requeue
	case labelRequeueAfter:
		return m.requeueAfter
	}
	return m.errorResult
}
