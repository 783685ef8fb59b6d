package memlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
)

// Two electors of one process share a Lock: the first leads, the second
// waits, and takes over with the next term as soon as the first releases
// the lock. Short timings make the handover quick; the defaults suit a
// network store.
func Example() {
	lock := memlock.NewLock()
	timings := leader.Config{LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond,
		RetryPeriod: 20 * time.Millisecond, ReleaseOnCancel: true}

	aLeads, bSawA, bLeads := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ca := timings
	ca.Identity = "a"
	ca.OnStartedLeading = func(ctx context.Context) {
		term, _ := leader.TermFromContext(ctx)
		fmt.Println("a leads in term", term)
		close(aLeads)
		<-ctx.Done() // work until leadership ends
	}
	cb := timings
	cb.Identity = "b"
	cb.OnNewLeader = func(id string) {
		if id == "a" {
			fmt.Println("b sees a leading")
			close(bSawA)
		}
	}
	cb.OnStartedLeading = func(ctx context.Context) {
		term, _ := leader.TermFromContext(ctx)
		fmt.Println("b leads in term", term)
		close(bLeads)
		<-ctx.Done()
	}
	a, err := leader.New(lock, ca)
	if err != nil {
		panic(err)
	}
	b, err := leader.New(lock, cb)
	if err != nil {
		panic(err)
	}

	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	doneA, doneB := make(chan error), make(chan error)
	go func() { doneA <- a.Run(ctxA) }()
	<-aLeads
	go func() { doneB <- b.Run(ctxB) }()
	<-bSawA
	stopA() // a releases the lock on its way out
	errA := <-doneA
	<-bLeads
	stopB()
	fmt.Println("a:", errA, "b:", <-doneB)
	// Output:
	// a leads in term 1
	// b sees a leading
	// b leads in term 2
	// a: <nil> b: <nil>
}
