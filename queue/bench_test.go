package queue_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/workqueue"
	"github.com/converge-go/converge/queue"
)

// The hot path: Add, Get and Done of one key on one goroutine, cycling over
// 1024 keys so the index and slab are warm. bench/ compares the queue with
// client-go's and controller-runtime's; these are for changes to this
// package (run before and after with -count=10 and compare with benchstat).

func BenchmarkAddGetDone(b *testing.B) {
	strs := make([]string, 1024)
	for i := range strs {
		strs[i] = fmt.Sprintf("namespace-%d/object-%06d", i%50, i)
	}
	b.Run("string", func(b *testing.B) { benchAddGetDone(b, must.Do(queue.New[string]()), strs) })
	b.Run("string/metrics", func(b *testing.B) {
		m, err := queue.NewMetrics(prometheus.NewRegistry(), "bench", "bench")
		if err != nil {
			b.Fatal(err)
		}
		benchAddGetDone(b, must.Do(queue.New[string](queue.WithMetrics(m))), strs)
	})
	b.Run("string/options", func(b *testing.B) { benchAddWithOptionsGetDone(b, must.Do(queue.New[string]()), strs) })
	ints := make([]int, 1024)
	for i := range ints {
		ints[i] = i
	}
	b.Run("int", func(b *testing.B) { benchAddGetDone(b, must.Do(queue.New[int]()), ints) })
	b.Run("int/no-ageing", func(b *testing.B) {
		benchAddGetDone(b, must.Do(queue.New[int](queue.WithAgeing(queue.NoAgeing))), ints)
	})
	// Key types that can hold NaN are checked on every Add and Done.
	floats := make([]float64, 1024)
	for i := range floats {
		floats[i] = float64(i) + 0.5
	}
	b.Run("float64", func(b *testing.B) { benchAddGetDone(b, must.Do(queue.New[float64]()), floats) })
}

func benchAddGetDone[K comparable](b *testing.B, q *queue.Queue[K], keys []K) {
	defer q.ShutDown()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i&1023]
		q.Add(k)
		got, _ := q.Get()
		q.Done(got)
	}
}

func benchAddWithOptionsGetDone[K comparable](b *testing.B, q *queue.Queue[K], keys []K) {
	defer q.ShutDown()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i&1023]
		q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityNormal}, k)
		got, _ := q.Get()
		q.Done(got)
	}
}

// BenchmarkForwarding is the hot path through the public face and on the
// engine it forwards to (what the queue was before it had a face): the
// difference is what forwarding costs.
func BenchmarkForwarding(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%06d", i%50, i)
	}
	b.Run("queue", func(b *testing.B) { benchAddGetDone(b, must.Do(queue.New[string]()), keys) })
	b.Run("engine", func(b *testing.B) {
		q := workqueue.New[string]()
		defer q.ShutDown()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Add(keys[i&1023])
			got, _ := q.Get()
			q.Done(got)
		}
	})
}

// BenchmarkAddGetDoneBehindABacklog keeps a backlog of ready keys at two
// priorities, so Get picks between levels on every call.
func BenchmarkAddGetDoneBehindABacklog(b *testing.B) {
	q := must.Do(queue.New[int]())
	defer q.ShutDown()
	for i := range 1000 {
		q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, 1_000_000+i)
		q.Add(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Add(i % 4096)
		got, _ := q.Get()
		q.Done(got)
	}
}
