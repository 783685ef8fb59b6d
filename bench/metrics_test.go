package bench

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// promProvider is a workqueue.MetricsProvider backed by Prometheus on a
// registry the caller passes. It defines the same seven workqueue_* series
// as k8s.io/component-base/metrics/prometheus/workqueue (the provider every
// Kubernetes component installs), as plain classic Prometheus metrics. The
// histograms use controller-runtime's buckets (10ns to ~3h, 12 buckets), the
// same that converge's queue uses, so a histogram observation costs every
// queue the same.
type promProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*promProvider)(nil)

func newPromProvider(reg prometheus.Registerer) *promProvider {
	const sub = "workqueue"
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	p := &promProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: sub, Name: "depth",
			Help: "Current depth of workqueue",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: sub, Name: "adds_total",
			Help: "Total number of adds handled by workqueue",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: sub, Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in workqueue before being requested.",
			Buckets: buckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: sub, Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration.",
		}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: sub, Name: "retries_total",
			Help: "Total number of retries handled by workqueue",
		}, []string{"name"}),
	}
	reg.MustRegister(p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longest, p.retries)
	return p
}

func (p *promProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

func (p *promProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

func (p *promProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

func (p *promProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

func (p *promProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

func (p *promProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name)
}

func (p *promProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
