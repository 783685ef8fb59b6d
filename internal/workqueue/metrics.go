package workqueue

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics use the names, help texts and labels of controller-runtime's
// workqueue metrics (pkg/internal/metrics/workqueue.go at v0.25): name and
// controller on every series, and priority on workqueue_depth. Existing
// dashboards and alerts work unchanged, and the metrics can share a
// registry with controller-runtime's own (see NewMetrics).
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

func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.sum += o.sum
	h.n += o.n
}

func (h *histogram) metric(d *prometheus.Desc, labels ...string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(bucketBounds))
	var c uint64
	for i, bound := range boundSeconds {
		c += h.counts[i]
		cumulative[bound] = c
	}
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, cumulative, labels...)
}

// maxPriorityLabels bounds the priority label's values, as controller-runtime
// does: past it, depth is reported as one series with the priority
// exceededPriorities.
const (
	maxPriorityLabels  = 25
	exceededPriorities = "exceeded_cardinality_limit"
)

// Metrics are the workqueue_* metrics of one queue name, registered once and
// fed by the queue, or the succession of queues, made WithMetrics(m).
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
type Metrics struct {
	reg              prometheus.Registerer
	name, controller string
	depth, adds      *prometheus.Desc
	retries          *prometheus.Desc
	unfinished       *prometheus.Desc
	longest          *prometheus.Desc
	queued, worked   *prometheus.Desc

	mu sync.Mutex
	// registered is cleared by Unregister: m then reports nothing.
	registered bool
	// sources read the queues m still reads, oldest first.
	sources []func() snapshot
	// folded holds the counts of the queues m no longer reads.
	folded snapshot
	// priorities are the priority label values seen, reported at 0 when
	// no key has them, so that series do not come and go; overflow is set
	// once there were more than maxPriorityLabels.
	priorities map[int32]bool
	overflow   bool
}

// snapshot is what a scrape reads from a queue under its lock, and the
// sum of them.
type snapshot struct {
	shutdown, idle              bool
	depth                       map[int32]int // ready keys by priority, > 0
	adds, retries               uint64
	unfinished, longest         float64 // seconds
	queueDuration, workDuration histogram
}

// The metrics as controller-runtime declares them: help texts and label
// names (in its order) must be identical for the two to share a registry.
var metricHelp = map[string]string{
	"workqueue_depth":                             "Current depth of workqueue by workqueue and priority",
	"workqueue_adds_total":                        "Total number of adds handled by workqueue",
	"workqueue_retries_total":                     "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	"workqueue_unfinished_work_seconds":           "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	"workqueue_longest_running_processor_seconds": "How many seconds has the longest running processor for workqueue been running.",
	"workqueue_queue_duration_seconds":            "How long in seconds an item stays in workqueue before being requested",
	"workqueue_work_duration_seconds":             "How long in seconds processing an item from workqueue takes.",
}

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
	if reg == nil {
		return nil, errors.New("queue: NewMetrics: nil registerer")
	}
	if name == "" {
		return nil, errors.New("queue: NewMetrics: empty name (the name label)")
	}
	if err := checkRegistry(reg, name, controller); err != nil {
		return nil, fmt.Errorf("queue: NewMetrics(%q, %q): %w", name, controller, err)
	}
	desc := func(metric string, labels ...string) *prometheus.Desc {
		fq := "workqueue_" + metric
		return prometheus.NewDesc(fq, metricHelp[fq], append([]string{"name", "controller"}, labels...), nil)
	}
	m := &Metrics{
		reg:        reg,
		name:       name,
		controller: controller,
		depth:      desc("depth", "priority"),
		adds:       desc("adds_total"),
		retries:    desc("retries_total"),
		unfinished: desc("unfinished_work_seconds"),
		longest:    desc("longest_running_processor_seconds"),
		queued:     desc("queue_duration_seconds"),
		worked:     desc("work_duration_seconds"),
		registered: true,
		priorities: map[int32]bool{PriorityNormal: true},
	}
	if err := reg.Register((*collector)(m)); err != nil {
		return nil, fmt.Errorf("queue: NewMetrics(%q, %q): %w", name, controller, err)
	}
	return m, nil
}

// checkRegistry looks for series that would clash with ours, if reg can be
// gathered.
func checkRegistry(reg prometheus.Registerer, name, controller string) error {
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		return nil
	}
	families, _ := g.Gather() // whatever could be gathered is enough
	for _, f := range families {
		help, ours := metricHelp[f.GetName()]
		if !ours {
			continue
		}
		if f.GetHelp() != help {
			return fmt.Errorf("%s is registered with another help text (%q): client-go's or an older converge's metrics?", f.GetName(), f.GetHelp())
		}
		for _, s := range f.GetMetric() {
			var names []string
			var n, c string
			for _, l := range s.GetLabel() {
				names = append(names, l.GetName())
				switch l.GetName() {
				case "name":
					n = l.GetValue()
				case "controller":
					c = l.GetValue()
				}
			}
			want := []string{"controller", "name"}
			if f.GetName() == "workqueue_depth" {
				want = append(want, "priority")
			}
			if !slices.Equal(names, want) { // the registry sorts label pairs
				return fmt.Errorf("%s is registered with the labels %v, not %v: client-go's or an older converge's metrics?", f.GetName(), names, want)
			}
			if n == name && c == controller {
				return errors.New("these series are already registered (one Metrics per queue name, made once)")
			}
		}
	}
	return nil
}

// Unregister stops m's metrics from being reported, so that a new Metrics
// may take its labels; it reports whether they were registered. Queues may
// go on reporting into m; nobody reads it. (The registry keeps m's
// collector, which reports nothing: an unchecked collector cannot be
// removed from a prometheus.Registry.)
func (m *Metrics) Unregister() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.registered
	m.registered = false
	return was
}

// attach makes m read a new queue, folding in the shut-down ones first.
func (m *Metrics) attach(read func() snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sources = slices.DeleteFunc(m.sources, func(read func() snapshot) bool {
		s := read()
		if s.shutdown {
			m.fold(&s)
		}
		return s.shutdown
	})
	m.sources = append(m.sources, read)
}

// fold adds the counts of a queue m stops reading to m.folded.
func (m *Metrics) fold(s *snapshot) {
	m.folded.adds += s.adds
	m.folded.retries += s.retries
	m.folded.queueDuration.add(&s.queueDuration)
	m.folded.workDuration.add(&s.workDuration)
}

// collector is Metrics as a prometheus.Collector, unexported so that
// Describe and Collect are not part of the Metrics API.
type collector Metrics

// Describe implements prometheus.Collector. It describes nothing, which
// makes the collector unchecked (see NewMetrics).
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	m.mu.Lock()
	if !m.registered {
		m.mu.Unlock()
		return
	}
	total := m.folded
	depth := map[string]int{}
	for p := range m.priorities {
		depth[strconv.Itoa(int(p))] = 0
	}
	// A shut-down queue with nothing left in it can do nothing more:
	// fold it now rather than at the next attach.
	m.sources = slices.DeleteFunc(m.sources, func(read func() snapshot) bool {
		s := read()
		total.adds += s.adds
		total.retries += s.retries
		total.queueDuration.add(&s.queueDuration)
		total.workDuration.add(&s.workDuration)
		total.unfinished += s.unfinished
		total.longest = max(total.longest, s.longest)
		if !s.shutdown {
			for p, n := range s.depth {
				depth[m.priorityLabel(p)] += n
			}
		}
		if s.shutdown && s.idle {
			m.fold(&s)
			return true
		}
		return false
	})
	if m.overflow {
		sum := 0
		for _, n := range depth {
			sum += n
		}
		depth = map[string]int{exceededPriorities: sum}
	}
	m.mu.Unlock()

	name, ctrl := m.name, m.controller
	for p, d := range depth {
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(d), name, ctrl, p)
	}
	ch <- prometheus.MustNewConstMetric(m.adds, prometheus.CounterValue, float64(total.adds), name, ctrl)
	ch <- prometheus.MustNewConstMetric(m.retries, prometheus.CounterValue, float64(total.retries), name, ctrl)
	ch <- prometheus.MustNewConstMetric(m.unfinished, prometheus.GaugeValue, total.unfinished, name, ctrl)
	ch <- prometheus.MustNewConstMetric(m.longest, prometheus.GaugeValue, total.longest, name, ctrl)
	ch <- total.queueDuration.metric(m.queued, name, ctrl)
	ch <- total.workDuration.metric(m.worked, name, ctrl)
}

// priorityLabel records p and returns its label value. Called with m.mu.
func (m *Metrics) priorityLabel(p int32) string {
	if !m.overflow && !m.priorities[p] {
		if len(m.priorities) == maxPriorityLabels {
			m.overflow, m.priorities = true, nil
		} else {
			m.priorities[p] = true
		}
	}
	return strconv.Itoa(int(p))
}

// collect reads the queue's metrics state. Walking the in-flight slots is
// O(the most keys ever processed at once), about the number of workers, and
// the depth by priority O(the priorities in use).
func (q *Queue[K]) collect() snapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.nanos()
	s := snapshot{
		shutdown:      q.shuttingDown,
		idle:          q.ready.n == 0 && q.processing == 0,
		depth:         make(map[int32]int, len(q.ready.active)),
		adds:          q.adds,
		retries:       q.retries,
		queueDuration: q.queueDuration,
		workDuration:  q.workDuration,
	}
	for _, l := range q.ready.active {
		s.depth[l.prio] = l.n
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
