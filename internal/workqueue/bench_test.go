package workqueue_test

import (
	"fmt"
	"testing"

	"github.com/converge-go/converge/internal/workqueue"
)

// BenchmarkAddGetDoneWithReasons is the add a controller makes
// (AddWithOptions with a reason, GetWithReasons), with reasons off and on:
// the cost of WithReasons alone. queue's BenchmarkAddGetDone is the plain
// hot path.
func BenchmarkAddGetDoneWithReasons(b *testing.B) {
	strs := make([]string, 1024)
	for i := range strs {
		strs[i] = fmt.Sprintf("namespace-%d/object-%06d", i%50, i)
	}
	b.Run("string/off", func(b *testing.B) { benchAddGetDoneWhy(b, workqueue.New[string](), strs) })
	b.Run("string/on", func(b *testing.B) { benchAddGetDoneWhy(b, workqueue.New[string](workqueue.WithReasons()), strs) })
}

func benchAddGetDoneWhy[K comparable](b *testing.B, q *workqueue.Queue[K], keys []K) {
	defer q.ShutDown()
	b.ReportAllocs()
	var rs workqueue.Reasons
	for i := 0; b.Loop(); i++ {
		k := keys[i&1023]
		q.AddWithOptions(workqueue.AddOptions{Reason: workqueue.Reason{What: 1, Rev: uint64(i)}}, k)
		got, _ := q.GetWithReasons(&rs)
		q.Done(got)
	}
}

// BenchmarkInitialList is a controller's share of an informer's initial
// list: 100k distinct keys added at low priority, one AddWithOptions each,
// then taken and done; with and without Grow announcing them first. ns/op
// and B/op are per list.
func BenchmarkInitialList(b *testing.B) {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%06d", i%50, i)
	}
	for _, grow := range []bool{false, true} {
		b.Run(fmt.Sprintf("grow=%v", grow), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q := workqueue.New[string]()
				if grow {
					q.Grow(len(keys))
				}
				for _, k := range keys {
					q.AddWithOptions(workqueue.AddOptions{Priority: workqueue.PriorityLow}, k)
				}
				for range keys {
					k, _ := q.Get()
					q.Done(k)
				}
				q.ShutDown()
			}
		})
	}
}
