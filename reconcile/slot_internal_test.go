package reconcile

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// BenchmarkWorkerSlot is what a reconcile adds to a worker's path for the
// debug pages: its slot's begin and end, with the two clock reads a timed
// controller (metrics or pages on) makes and without them (neither on).
//
//	go test -run xxx -bench BenchmarkWorkerSlot -count 10 ./reconcile/
func BenchmarkWorkerSlot(b *testing.B) {
	var clk Clock = clock.RealClock{}
	for _, timed := range []bool{false, true} {
		name := "untimed"
		if timed {
			name = "timed"
		}
		b.Run(name, func(b *testing.B) {
			var s workerSlot[string]
			why := triggerSet{n: 1, recs: [4]triggerRec{{what: reasonWhat(TriggerChange, Updated, 0), count: 1, rev: 42}}}
			for i := range b.N {
				var start time.Time
				if timed {
					start = clk.Now()
				}
				s.begin("key", uint64(i), start, &why)
				var took time.Duration
				if timed {
					took = clk.Since(start)
				}
				s.end(took, labelSuccess, nil)
			}
		})
	}
}
