package workqueue_test

import (
	"fmt"

	"github.com/converge-go/converge/internal/workqueue"
)

// A queue that keeps why each key is queued: two changes and a resync of
// one key merge into two reasons, handed over with the key.
func ExampleQueue_GetWithReasons() {
	q := workqueue.New[string](workqueue.WithReasons())
	defer q.ShutDown()
	const changed, resynced = 1, 2 // the caller's encoding
	q.AddWithOptions(workqueue.AddOptions{Reason: workqueue.Reason{What: changed, Rev: 7}}, "a")
	q.AddWithOptions(workqueue.AddOptions{Reason: workqueue.Reason{What: changed, Rev: 9}}, "a")
	q.AddWithOptions(workqueue.AddOptions{Reason: workqueue.Reason{What: resynced}}, "a")

	var why workqueue.Reasons // reuse one per worker: no allocation
	key, _ := q.GetWithReasons(&why)
	for _, r := range why.List() {
		fmt.Printf("%s: what %d, rev %d, ×%d\n", key, r.What, r.Rev, r.Count)
	}
	q.Done(key)
	// Output:
	// a: what 1, rev 9, ×2
	// a: what 2, rev 0, ×1
}
