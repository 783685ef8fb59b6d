package queue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/queue"
)

func TestMetricsShouldUseTheStandardWorkqueueNamesAndReadTheQueuesState(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	q, clk := newTestQueue(t, queue.WithName("things"), queue.WithMetrics(reg))

	q.Add("a")
	q.Add("b")
	q.Add("a") // deduplicated: not an add
	q.AddAfter("c", time.Second)
	clk.Step(3 * time.Second) // a and b have waited 3s
	k := get(t, q)
	clk.Step(2 * time.Second) // k has run 2s
	get(t, q)
	clk.Step(time.Second) // now 3s and 1s in flight

	want := `
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="things"} 3
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{name="things"} 1
# HELP workqueue_longest_running_processor_seconds How many seconds has the longest running processor for workqueue been running.
# TYPE workqueue_longest_running_processor_seconds gauge
workqueue_longest_running_processor_seconds{name="things"} 3
# HELP workqueue_retries_total Total number of retries handled by workqueue
# TYPE workqueue_retries_total counter
workqueue_retries_total{name="things"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"workqueue_adds_total", "workqueue_depth", "workqueue_longest_running_processor_seconds", "workqueue_retries_total"))

	unfinished := gauge(t, reg, "workqueue_unfinished_work_seconds")
	assert.InDelta(t, 4.0, unfinished, 1e-9, "3s + 1s of work in flight")

	q.Done(k)
	q.AddRateLimited("d")
	families, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		switch {
		case m.GetHistogram() != nil:
			byName[f.GetName()] = float64(m.GetHistogram().GetSampleCount())
		case m.GetCounter() != nil:
			byName[f.GetName()] = m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, 2.0, byName["workqueue_queue_duration_seconds"], "two Gets observed")
	assert.Equal(t, 1.0, byName["workqueue_work_duration_seconds"], "one Done observed")
	assert.Equal(t, 1.0, byName["workqueue_retries_total"])
}

func TestQueueDurationShouldMeasureFromReadyToGet(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, clk := newTestQueue(t, queue.WithName("q"), queue.WithMetrics(reg))
	q.Add("a")
	clk.Step(1500 * time.Millisecond)
	q.Done(get(t, q))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "workqueue_queue_duration_seconds" {
			assert.InDelta(t, 1.5, f.GetMetric()[0].GetHistogram().GetSampleSum(), 1e-9)
			return
		}
	}
	t.Fatal("workqueue_queue_duration_seconds not gathered")
}

func TestShutDownShouldFreeTheMetricsNameForANewQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := queue.New[string](queue.WithName("same"), queue.WithMetrics(reg))
	assert.PanicsWithValue(t,
		"queue: WithMetrics: a collector with the same name label is already registered (two live queues with one name?)",
		func() { queue.New[string](queue.WithName("same"), queue.WithMetrics(reg)) })
	q.ShutDown()
	again := queue.New[string](queue.WithName("same"), queue.WithMetrics(reg))
	again.ShutDown()
}

func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}
