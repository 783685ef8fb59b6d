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
