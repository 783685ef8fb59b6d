package reconcile

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/workqueue"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// BenchmarkDebugLockHolds measures how long a debug page holds the locks
// the workers take, which is how long it can stall them (wall-clock
// measures of the workers themselves are dominated by scheduling on a
// shared machine: BenchmarkDebugPagesWorkerStall). The queue's Stats,
// Peek of the ready keys shown and Inspect of a key run wholly under the
// queue's lock: their ns/op is the hold, with 100k keys ready. The pass
// over the failing keys for the top ones (keys/failing=N/top: ns/op is the
// whole pass, which one hold of their lock covered before it was cut into
// chunks) holds the lock hold-p99-µs (99th percentile) and at most
// hold-max-µs at a time; every reconcile
// that ends takes that lock while any key fails.
//
//	go test -run xxx -bench BenchmarkDebugLockHolds -count 5 ./reconcile/
func BenchmarkDebugLockHolds(b *testing.B) {
	q := workqueue.New[string](workqueue.WithReadyTimes())
	defer q.ShutDown()
	for i := range 100_000 {
		q.Add(fmt.Sprintf("k-%d", i))
	}
	b.Run("queue/queued=100k/Stats", func(b *testing.B) {
		for b.Loop() {
			_ = q.Stats()
		}
	})
	b.Run("queue/queued=100k/Peek", func(b *testing.B) {
		for b.Loop() {
			_ = q.Peek(debugpage.ReadyShown)
		}
	})
	b.Run("queue/queued=100k/Inspect", func(b *testing.B) {
		for b.Loop() {
			_, _ = q.Inspect("k-99999")
		}
	})
	for _, n := range []int{1_000, 10_000, 100_000} {
		var ks keyStates[string]
		ks.init()
		err := errors.New("failing")
		for i := range n {
			ks.failed(fmt.Sprintf("f-%d", i), err, 0)
		}
		b.Run(fmt.Sprintf("keys/failing=%d/top", n), func(b *testing.B) {
			for b.Loop() {
				ks.top(debugpage.FailingShown)
			}
			holds := chunkHolds(&ks)
			b.ReportMetric(float64(holds[len(holds)*99/100].Nanoseconds())/1e3, "hold-p99-µs")
			b.ReportMetric(float64(holds[len(holds)-1].Nanoseconds())/1e3, "hold-max-µs")
		})
	}
}

// chunkHolds returns, sorted, how long 20 passes over the failing keys
// held their lock in each piece: from the first key a hold visits to its
// last, top's comparison included. The longest may include a preemption
// or a GC assist while the lock was held.
func chunkHolds(ks *keyStates[string]) []time.Duration {
	var holds []time.Duration
	for range 20 {
		i, best := 0, 0
		var holdStart time.Time
		ks.scanFailing(runtime.Gosched, func(_ string, st *KeyStatus) bool {
			switch i % scanChunk {
			case 0:
				holdStart = time.Now()
			case scanChunk - 1:
				holds = append(holds, time.Since(holdStart))
			}
			best = max(best, st.Attempts)
			i++
			return true
		})
	}
	slices.Sort(holds)
	return holds
}
