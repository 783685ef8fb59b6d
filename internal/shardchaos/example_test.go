package shardchaos_test

import (
	"encoding/json"
	"fmt"

	"github.com/converge-go/converge/internal/shardchaos"
)

// A replica appends one Entry per accepted reconcile to the fenced log;
// the test reads them back as JSON.
func ExampleEntry() {
	var e shardchaos.Entry
	if err := json.Unmarshal([]byte(`{"key":"k7","replica":"r2","bucket":3,"epoch":5,"start":100,"end":250}`), &e); err != nil {
		panic(err)
	}
	fmt.Printf("%s reconciled %s in bucket %d, epoch %d, for %d ns\n", e.Replica, e.Key, e.Bucket, e.Epoch, e.End-e.Start)
	// Output: r2 reconciled k7 in bucket 3, epoch 5, for 150 ns
}
