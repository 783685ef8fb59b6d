package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// TestQueueMetricsShouldShareControllerRuntimesRegistry lives here, in the
// module that depends on controller-runtime: a converge queue's metrics
// register beside controller-runtime's workqueue_* collectors on its global
// registry, and both report.
func TestQueueMetricsShouldShareControllerRuntimesRegistry(t *testing.T) {
	// controller-runtime registers its collectors on metrics.Registry when
	// its queue package loads; a queue of its own makes them report. The
	// registry is global: a name of its own per run (-count=n).
	crName := fmt.Sprint("cr-queue-", time.Now().UnixNano())
	cr := priorityqueue.New[string](crName)
	defer cr.ShutDown()
	cr.Add("x")
	name := fmt.Sprint("converge-queue-", time.Now().UnixNano())
	m, err := queue.NewMetrics(crmetrics.Registry, name, name)
	require.NoError(t, err)
	defer m.Unregister()
	q := must.Do(queue.New[string](queue.WithMetrics(m)))
	defer q.ShutDown()
	q.Add("y")
	require.Eventually(t, func() bool {
		return gaugeValue(t, crmetrics.Registry, "workqueue_depth", map[string]string{"name": crName}) == 1
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, gaugeValue(t, crmetrics.Registry, "workqueue_depth", map[string]string{"name": name, "priority": "0"}))
}

// gaugeValue is the value of the first gauge series of name whose labels
// include labels, or -1 if there is none yet.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
