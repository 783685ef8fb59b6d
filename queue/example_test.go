package queue_test

import (
	"fmt"
	"github.com/converge-go/converge/queue"
	"log"
	"sync"
)

// A controller's workers: Get a key, work on it, tell the queue how it went,
// then Done. Keys added while a worker holds them are handed out once more.
func Example() {
	q, err := queue.New[string]()
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"default/web", "default/db", "default/web"} {
		q.Add(key) // the second "default/web" is deduplicated
	}

	var wg sync.WaitGroup
	processed := make(chan string, 10)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			key, shutdown := q.Get()
			if shutdown {
				return
			}
			processed <- key
			q.Forget(key) // success: reset its backoff
			q.Done(key)
		}
	}()
	q.ShutDownWithDrain()
	wg.Wait()
	close(processed)
	for key := range processed {
		fmt.Println(key)
	}
	// Output:
	// default/web
	// default/db
}

// Keys from an informer's initial list go in at low priority, so that a fresh
// change does not wait behind thousands of unchanged objects.
func ExampleQueue_AddWithOptions() {
	q, err := queue.New[string]()
	if err != nil {
		log.Fatal(err)
	}
	defer q.ShutDown()
	q.AddWithOptions(queue.AddOptions{Priority: queue.PriorityLow}, "listed-1", "listed-2", "listed-3")
	q.Add("changed-just-now")
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println(key)
		q.Done(key)
	}
	// Output:
	// changed-just-now
	// listed-1
	// listed-2
	// listed-3
}

// With a group function, one tenant's flood cannot starve another tenant.
func ExampleWithGroup() {
	tenant := func(key string) string { return key[:1] }
	q, err := queue.New[string](queue.WithGroup(tenant))
	if err != nil {
		log.Fatal(err)
	}
	defer q.ShutDown()
	for _, key := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		q.Add(key)
	}
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Print(key, " ")
		q.Done(key)
	}
	fmt.Println()
	// Output: a1 b1 c1 a2 b2 a3
}
