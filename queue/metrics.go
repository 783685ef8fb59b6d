package queue

import (
	"errors"
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics use the names and labels of client-go's and controller-runtime's
// workqueue metrics, so existing dashboards and alerts work unchanged.
//
// Nothing here uses an atomic or a Prometheus metric on the hot path. The
// two histograms are plain counters updated under the queue's lock, which
// Get and Done hold anyway; depth, the counters and the in-flight gauges are
// read from the queue's own state. A scrape turns it all into constant
// metrics. (client-go updates its metrics under its lock through Prometheus'
// atomics and two extra maps, and loses most of its throughput to that.)

// bucketBounds are controller-runtime's workqueue buckets, 10ns to 1000s in
// decades, in nanoseconds; boundSeconds is the same in seconds.
var (
	bucketBounds = [...]int64{1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12}
	boundSeconds = prometheus.ExponentialBuckets(10e-9, 10, len(bucketBounds))
)

// histogram counts durations into bucketBounds. The queue's lock guards it.
type histogram struct {
	// counts[i] counts observations in (bucketBounds[i-1], bucketBounds[i]];
	// the last slot counts those above every bound.
	counts [len(bucketBounds) + 1]uint64
	sum    float64 // seconds
	n      uint64
}

func (h *histogram) observe(nanos int64) {
	// The clock is read before locking, so a key made ready by another
	// goroutine in between can look as if it waited a little less than 0.
	nanos = max(nanos, 0)
	i := 0
	for i < len(bucketBounds) && nanos > bucketBounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += float64(nanos) / 1e9
	h.n++
}

func (h *histogram) metric(d *prometheus.Desc) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(bucketBounds))
	var c uint64
	for i, bound := range boundSeconds {
		c += h.counts[i]
		cumulative[bound] = c
	}
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, cumulative)
}

// metrics is the queue's Prometheus collector.
type metrics struct {
	queueDuration, workDuration histogram // guarded by the queue's lock

	read       func() snapshot
	registerer prometheus.Registerer

	depth, adds, retries, unfinished, longest, queued, worked *prometheus.Desc
}

// snapshot is what a scrape reads from the queue under its lock.
type snapshot struct {
	depth, adds, retries        float64
	unfinished, longest         float64 // seconds
	queueDuration, workDuration histogram
}

func newMetrics(name string, read func() snapshot) *metrics {
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc("workqueue_"+metric, help, nil, prometheus.Labels{"name": name})
	}
	return &metrics{
		read:       read,
		depth:      desc("depth", "Current depth of workqueue"),
		adds:       desc("adds_total", "Total number of adds handled by workqueue"),
		retries:    desc("retries_total", "Total number of retries handled by workqueue"),
		unfinished: desc("unfinished_work_seconds", "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."),
		longest:    desc("longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running."),
		queued:     desc("queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested"),
		worked:     desc("work_duration_seconds", "How long in seconds processing an item from workqueue takes."),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	if err := reg.Register(m); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			return errors.New("a collector with the same name label is already registered (two live queues with one name?)")
		}
		return err
	}
	m.registerer = reg
	return nil
}

func (m *metrics) unregister() { m.registerer.Unregister(m) }

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.depth, m.adds, m.retries, m.unfinished, m.longest, m.queued, m.worked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.read()
	ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, s.depth)
	ch <- prometheus.MustNewConstMetric(m.adds, prometheus.CounterValue, s.adds)
	ch <- prometheus.MustNewConstMetric(m.retries, prometheus.CounterValue, s.retries)
	ch <- prometheus.MustNewConstMetric(m.unfinished, prometheus.GaugeValue, s.unfinished)
	ch <- prometheus.MustNewConstMetric(m.longest, prometheus.GaugeValue, s.longest)
	ch <- s.queueDuration.metric(m.queued)
	ch <- s.workDuration.metric(m.worked)
}

// collect reads the queue's metrics state. Walking the in-flight slots is
// O(the most keys ever processed at once), about the number of workers.
func (q *Queue[K]) collect() snapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.nanos()
	s := snapshot{
		depth:         float64(q.ready.n),
		adds:          float64(q.adds),
		retries:       float64(q.retries),
		queueDuration: q.metrics.queueDuration,
		workDuration:  q.metrics.workDuration,
	}
	var unfinished, oldest int64 = 0, math.MaxInt64
	for _, start := range q.inflight {
		if start != freeSlot {
			unfinished += now - start
			oldest = min(oldest, start)
		}
	}
	s.unfinished = seconds(unfinished)
	if oldest != math.MaxInt64 {
		s.longest = seconds(now - oldest)
	}
	return s
}

// freeSlot marks a free slot in Queue.inflight; start times are never
// negative.
const freeSlot = -1

// startInflight records a start time and returns its slot.
func (q *Queue[K]) startInflight(now int64) int32 {
	if n := len(q.inflightFree); n > 0 {
		slot := q.inflightFree[n-1]
		q.inflightFree = q.inflightFree[:n-1]
		q.inflight[slot] = now
		return slot
	}
	q.inflight = append(q.inflight, now)
	return int32(len(q.inflight) - 1)
}

// endInflight frees slot and returns the start time it held.
func (q *Queue[K]) endInflight(slot int32) int64 {
	start := q.inflight[slot]
	q.inflight[slot] = freeSlot
	q.inflightFree = append(q.inflightFree, slot)
	return start
}
