package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/queue"
)

// Starvation scenario: how long does a low-priority key wait while the
// normal lane is saturated? (controller-runtime's priority queue starves it:
// https://github.com/kubernetes-sigs/controller-runtime/issues/3496)
//
// Two workers Get a key, sleep for starvationWork (a reconcile waiting on a
// store; sleeping leaves the CPU to the producer, so the lane stays full on
// two cores) and call Done; one producer keeps at least starvationBacklog
// normal keys ready (from a space of 10k distinct keys, so deduplication
// bounds the backlog). starvationLowKeys
// keys are added at PriorityLow (controller-runtime's handler.LowPriority,
// what an informer's initial list gets), one every 100ms from the start.
// After starvationWindow the run stops. Reported per queue: the worst wait
// of a low key from its Add to the Get that returned it, counting a key
// never served as having waited until the end, and how many were never
// served.
//
// converge runs with an ageing bound of 1s (the default is 30s, which would
// need a window of over half a minute), and with ageing off as a control.

const (
	starvationWindow  = 3 * time.Second
	starvationWork    = 500 * time.Microsecond
	starvationBacklog = 1000
	starvationLowKeys = 10
	starvationWorkers = 2
)

// lowAdder is a queue that can add a key at PriorityLow.
type lowAdder interface {
	Queue
	addLow(key string)
}

type convergeLow struct{ *queue.Queue[string] }

func (q convergeLow) addLow(key string) {
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, key)
}

type priorityQueueLow struct {
	priorityqueue.PriorityQueue[string]
}

func (q priorityQueueLow) addLow(key string) {
	low := queue.PriorityLow // == handler.LowPriority
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, key)
}

func BenchmarkStarvation(b *testing.B) {
	variants := []struct {
		name string
		make func() lowAdder
	}{
		{"converge/ageing=1s", func() lowAdder { return convergeLow{must.Do(queue.New[string](queue.WithAgeing(time.Second)))} }},
		{"converge/no-ageing", func() lowAdder { return convergeLow{must.Do(queue.New[string](queue.WithAgeing(queue.NoAgeing)))} }},
		{"priorityqueue", func() lowAdder { return priorityQueueLow{priorityqueue.New[string]("")} }},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			var worst time.Duration
			starved := 0
			for range b.N {
				settle()
				w, s := starvationOnce(v.make())
				worst = max(worst, w)
				starved += s
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(worst.Milliseconds()), "worst-wait-ms")
			b.ReportMetric(float64(starved)/float64(b.N), "starved/op")
		})
	}
}

// starvationOnce runs the scenario once and returns the worst wait of a
// low key and how many were never served.
func starvationOnce(q lowAdder) (worst time.Duration, starved int) {
	var (
		mu     sync.Mutex
		added  = map[string]time.Time{}
		served = map[string]time.Duration{}
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for range starvationWorkers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				now := time.Now()
				mu.Lock()
				if at, ok := added[k]; ok && !stop.Load() { // not the drain after the window
					served[k] = now.Sub(at)
				}
				mu.Unlock()
				time.Sleep(starvationWork)
				q.Done(k)
			}
		})
	}
	normal := make([]string, 10_000)
	for i := range normal {
		normal[i] = fmt.Sprintf("normal-%d", i)
	}
	wg.Go(func() { // the normal lane: never below the backlog
		for i := 0; !stop.Load(); {
			if q.Len() >= starvationBacklog {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			for range 100 {
				q.Add(normal[i%len(normal)])
				i++
			}
		}
	})
	start := time.Now()
	for i := range starvationLowKeys {
		time.Sleep(time.Until(start.Add(time.Duration(i) * 100 * time.Millisecond)))
		key := fmt.Sprintf("low-%d", i)
		mu.Lock()
		added[key] = time.Now()
		mu.Unlock()
		q.addLow(key)
	}
	time.Sleep(time.Until(start.Add(starvationWindow)))
	end := time.Now()
	stop.Store(true)
	q.ShutDown()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for key, at := range added {
		wait, ok := served[key]
		if !ok {
			starved++
			wait = end.Sub(at)
		}
		worst = max(worst, wait)
	}
	return worst, starved
}
