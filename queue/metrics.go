package queue

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics use the names and labels of client-go's and controller-runtime's
// workqueue metrics, so existing dashboards and alerts work unchanged.
//
// Only the two histograms are touched on the hot path, outside the queue's
// lock. Depth, the counters and the in-flight gauges are read from the
// queue's own state when Prometheus scrapes, so keeping them costs nothing
// per operation (client-go updates them all under its lock).

// durationBuckets are controller-runtime's workqueue buckets: 10ns to ~3h.
var durationBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

type metrics struct {
	queueDuration prometheus.Histogram
	workDuration  prometheus.Histogram
	state         *stateCollector
	registerer    prometheus.Registerer
}

// snapshot is the queue state a scrape reads.
type snapshot struct {
	depth, adds, retries float64
	unfinished, longest  float64 // seconds
}

func newMetrics(name string, read func() snapshot) *metrics {
	labels := prometheus.Labels{"name": name}
	return &metrics{
		queueDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem:   "workqueue",
			Name:        "queue_duration_seconds",
			Help:        "How long in seconds an item stays in workqueue before being requested",
			ConstLabels: labels,
			Buckets:     durationBuckets,
		}),
		workDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem:   "workqueue",
			Name:        "work_duration_seconds",
			Help:        "How long in seconds processing an item from workqueue takes.",
			ConstLabels: labels,
			Buckets:     durationBuckets,
		}),
		state: &stateCollector{
			read:       read,
			depth:      desc("depth", "Current depth of workqueue", name),
			adds:       desc("adds_total", "Total number of adds handled by workqueue", name),
			retries:    desc("retries_total", "Total number of retries handled by workqueue", name),
			unfinished: desc("unfinished_work_seconds", "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.", name),
			longest:    desc("longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running.", name),
		},
	}
}

func desc(name, help, queue string) *prometheus.Desc {
	return prometheus.NewDesc("workqueue_"+name, help, nil, prometheus.Labels{"name": queue})
}

// register registers all collectors, or none.
func (m *metrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.queueDuration, m.workDuration, m.state}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return errors.New("a collector with the same name label is already registered (two live queues with one name?)")
			}
			return err
		}
	}
	m.registerer = reg
	return nil
}

func (m *metrics) unregister() {
	m.registerer.Unregister(m.queueDuration)
	m.registerer.Unregister(m.workDuration)
	m.registerer.Unregister(m.state)
}

// stateCollector turns a snapshot of the queue into metrics at scrape time.
type stateCollector struct {
	read                                      func() snapshot
	depth, adds, retries, unfinished, longest *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.adds
	ch <- c.retries
	ch <- c.unfinished
	ch <- c.longest
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, s.depth)
	ch <- prometheus.MustNewConstMetric(c.adds, prometheus.CounterValue, s.adds)
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, s.retries)
	ch <- prometheus.MustNewConstMetric(c.unfinished, prometheus.GaugeValue, s.unfinished)
	ch <- prometheus.MustNewConstMetric(c.longest, prometheus.GaugeValue, s.longest)
}

// collect reads the queue's metrics state. Walking the in-flight list is
// O(keys being processed), which is bounded by the number of workers.
func (q *Queue[K]) collect() snapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.nanos()
	s := snapshot{depth: float64(q.ready.n), adds: float64(q.adds), retries: float64(q.retries)}
	var unfinished int64
	for idx := q.inflight.head; idx != none; idx = q.slab.entries[idx].next {
		unfinished += now - q.slab.times[idx]
	}
	s.unfinished = seconds(unfinished)
	if head := q.inflight.head; head != none {
		s.longest = seconds(now - q.slab.times[head])
	}
	return s
}
