package bench

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

func init() {
	impls = append([]impl{{name: "converge", newQueue: newConverge}}, impls...)
}

// newConverge is the converge queue with its defaults; with a registry it
// registers its workqueue_* metrics there.
func newConverge(name string, reg prometheus.Registerer) Queue {
	if reg == nil {
		return must.Do(queue.New[string]())
	}
	m, err := queue.NewMetrics(reg, name, name)
	if err != nil {
		panic(err) // a fresh registry per run: cannot clash
	}
	return must.Do(queue.New[string](queue.WithMetrics(m)))
}
