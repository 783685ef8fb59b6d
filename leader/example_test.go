package leader_test

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
)

// A replica that does its work only while it leads. The work reads the
// term's fencing token from its context, to make its writes conditional on
// it.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	e, err := leader.New(memlock.NewLock(), leader.Config{
		Identity:        "replica-1",
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context) {
			term, _ := leader.TermFromContext(ctx)
			fmt.Println("leading in term", term)
			stop() // the work is done: shut the replica down
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
		OnNewLeader:      func(id string) { fmt.Println("leader is", id) },
	})
	if err != nil {
		panic(err)
	}
	if err := e.Run(ctx); err != nil {
		panic(err)
	}
	fmt.Println("leader after release:", e.Leader() == "")
	// Output:
	// leader is replica-1
	// leading in term 1
	// stopped leading
	// leader after release: true
}
