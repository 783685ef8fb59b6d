package queue_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

func newMetrics(t *testing.T, reg prometheus.Registerer, name string) *queue.Metrics {
	t.Helper()
	m, err := queue.NewMetrics(reg, name, name)
	require.NoError(t, err)
	return m
}

func TestMetricsShouldUseControllerRuntimesNamesAndLabelsAndReadTheQueuesState(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	q, clk := newTestQueue(t, queue.WithMetrics(newMetrics(t, reg, "things")))

	q.Add("a")
	q.Add("b")
	q.Add("a") // deduplicated: not an add
	q.AddAfter("c", time.Second)
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "low")
	clk.Step(3 * time.Second) // a and b have waited 3s
	k := get(t, q)
	clk.Step(2 * time.Second) // k has run 2s
	get(t, q)
	clk.Step(time.Second) // now 3s and 1s in flight

	want := `
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="things",name="things"} 4
# HELP workqueue_depth Current depth of workqueue by workqueue and priority
# TYPE workqueue_depth gauge
workqueue_depth{controller="things",name="things",priority="-100"} 1
workqueue_depth{controller="things",name="things",priority="0"} 1
# HELP workqueue_longest_running_processor_seconds How many seconds has the longest running processor for workqueue been running.
# TYPE workqueue_longest_running_processor_seconds gauge
workqueue_longest_running_processor_seconds{controller="things",name="things"} 3
# HELP workqueue_retries_total Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="things",name="things"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"workqueue_adds_total", "workqueue_depth", "workqueue_longest_running_processor_seconds", "workqueue_retries_total"))
	assert.InDelta(t, 4.0, value(t, reg, "workqueue_unfinished_work_seconds", nil), 1e-9, "3s + 1s of work in flight")

	q.Done(k)
	q.AddRateLimited("d")
	assert.Equal(t, 2.0, value(t, reg, "workqueue_queue_duration_seconds", nil), "two Gets observed")
	assert.Equal(t, 1.0, value(t, reg, "workqueue_work_duration_seconds", nil), "one Done observed")
	assert.Equal(t, 2.0, value(t, reg, "workqueue_retries_total", nil), "AddAfter and AddRateLimited")
}

func TestQueueDurationShouldMeasureFromReadyToGet(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, clk := newTestQueue(t, queue.WithMetrics(newMetrics(t, reg, "q")))
	q.Add("a")
	clk.Step(1500 * time.Millisecond)
	q.Done(get(t, q))
	h := family(t, reg, "workqueue_queue_duration_seconds")[0].GetHistogram()
	assert.InDelta(t, 1.5, h.GetSampleSum(), 1e-9)
}

func TestCountersShouldKeepCountingWhenANewQueueReplacesAShutDownOne(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(t, reg, "c")
	for term := 1; term <= 3; term++ {
		q := must.Do(queue.New[string](queue.WithMetrics(m)))
		q.Add("a")
		q.AddAfter("b", time.Hour)
		q.Done(get(t, q))
		q.Add("left over")
		assert.Equal(t, 1.0, value(t, reg, "workqueue_depth", map[string]string{"priority": "0"}), "term %d: the live queue's depth", term)
		q.ShutDown()
		assert.Equal(t, float64(2*term), value(t, reg, "workqueue_adds_total", nil), "term %d", term)
		assert.Equal(t, float64(term), value(t, reg, "workqueue_retries_total", nil), "term %d", term)
		assert.Equal(t, float64(term), value(t, reg, "workqueue_work_duration_seconds", nil), "term %d", term)
		assert.Equal(t, 0.0, value(t, reg, "workqueue_depth", map[string]string{"priority": "0"}), "term %d: a shut-down queue is not live", term)
	}
	assert.True(t, m.Unregister())
	assert.False(t, m.Unregister(), "already gone")
	families, err := reg.Gather()
	require.NoError(t, err)
	assert.Empty(t, families, "an unregistered Metrics reports nothing")
	_, err = queue.NewMetrics(reg, "c", "c")
	assert.NoError(t, err, "Unregister frees the labels")
}

func TestInFlightGaugesShouldShowWorkStillRunningAfterShutDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, clk := newTestQueue(t, queue.WithMetrics(newMetrics(t, reg, "slow")))
	q.Add("a")
	k := get(t, q)
	q.ShutDown()
	clk.Step(time.Minute)
	assert.Equal(t, 60.0, value(t, reg, "workqueue_longest_running_processor_seconds", nil))
	q.Done(k)
	assert.Equal(t, 0.0, value(t, reg, "workqueue_longest_running_processor_seconds", nil))
	assert.Equal(t, 1.0, value(t, reg, "workqueue_work_duration_seconds", nil))
}

func TestNewMetricsShouldReturnAnErrorNeverPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(t, reg, "same")
	_, err := queue.NewMetrics(reg, "same", "same")
	assert.EqualError(t, err, `queue: NewMetrics("same", "same"): these series are already registered (one Metrics per queue name, made once)`)
	_, err = queue.NewMetrics(reg, "same", "other controller")
	assert.NoError(t, err, "another label set is another series")

	// A registry that holds workqueue_* with other labels, as client-go's
	// component-base metrics have (name only).
	old := prometheus.NewRegistry()
	adds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue"}, []string{"name"})
	old.MustRegister(adds)
	adds.WithLabelValues("legacy").Inc()
	_, err = queue.NewMetrics(old, "q", "q")
	assert.EqualError(t, err, `queue: NewMetrics("q", "q"): workqueue_adds_total is registered with the labels [name], not [controller name]: client-go's or an older converge's metrics?`)
	// A controller-runtime queue of the same name.
	cr := prometheus.NewRegistry()
	crAdds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue"}, []string{"name", "controller"})
	cr.MustRegister(crAdds)
	crAdds.WithLabelValues("q", "q").Inc()
	_, err = queue.NewMetrics(cr, "q", "q")
	assert.ErrorContains(t, err, "already registered")
	_, err = queue.NewMetrics(cr, "other", "other")
	assert.NoError(t, err)

	_, err = queue.NewMetrics(nil, "q", "q")
	assert.EqualError(t, err, "queue: NewMetrics: nil registerer")
	_, err = queue.NewMetrics(reg, "", "q")
	assert.EqualError(t, err, "queue: NewMetrics: empty name (the name label)")
}

func TestDepthShouldReportAtMost25PriorityLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, _ := newTestQueue(t, queue.WithMetrics(newMetrics(t, reg, "p")))
	for p := range 24 {
		q.AddWithOptions(queue.AddOptions{Priority: p + 1}, fmt.Sprint(p))
	}
	assert.Len(t, family(t, reg, "workqueue_depth"), 25, "24 priorities and PriorityNormal, reported at 0")
	q.AddWithOptions(queue.AddOptions{Priority: 1000}, "one too many")
	depth := family(t, reg, "workqueue_depth")
	require.Len(t, depth, 1)
	assert.Equal(t, "exceeded_cardinality_limit", label(depth[0], "priority"))
	assert.Equal(t, 25.0, depth[0].GetGauge().GetValue())
}

// family gathers the series of one metric.
func family(t *testing.T, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	t.Fatalf("%s not gathered", name)
	return nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		if label(m, k) != v {
			return false
		}
	}
	return true
}

// value is the value of the first series of name whose labels include
// labels: a gauge's or counter's value, a histogram's sample count.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range family(t, reg, name) {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		default:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s: no series with labels %v", name, labels)
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
