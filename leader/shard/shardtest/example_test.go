package shardtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

// A Backend's tests run the conformance suite on fresh backends: the test
// below, in the backend's package, is how memlock's run it. A backend over
// a shared server prefixes each backend's names (Prefixed), so that no run
// sees an earlier one's records.
func ExampleRunBackend() {
	test := func(t *testing.T) { // func TestLocksShouldSatisfyTheShardBackendContract(t *testing.T)
		shardtest.RunBackend(t, func(*testing.T) shard.Backend { return memlock.NewLocks() })
	}
	_ = test
}

// Each replica of a test gets its own Cuttable view of one shared
// backend; cutting it is that replica losing its store, while the others
// go on.
func ExampleCuttable() {
	ctx := context.Background()
	shared := memlock.NewLocks()
	r1 := &shardtest.Cuttable{Backend: shared}
	r2 := &shardtest.Cuttable{Backend: shared}
	if _, err := r2.Lock("bucket-0").Create(ctx, leader.Record{HolderIdentity: "r2"}); err != nil {
		panic(err)
	}

	r1.Cut()
	_, err := r1.Lock("bucket-0").Get(ctx)
	fmt.Println("r1:", err)
	rec, _ := r2.Lock("bucket-0").Get(ctx)
	fmt.Println("r2 reads holder", rec.HolderIdentity)
	r1.Restore()
	rec, _ = r1.Lock("bucket-0").Get(ctx)
	fmt.Println("r1 reads holder", rec.HolderIdentity)
	// Output:
	// r1: shardtest: cut off from the store
	// r2 reads holder r2
	// r1 reads holder r2
}

// Prefixed keeps one run's records apart from another's on a shared
// backend: its names are the backend's without the prefix.
func ExamplePrefixed() {
	ctx := context.Background()
	shared := memlock.NewLocks()
	run := shardtest.Prefixed{Backend: shared, Prefix: "run-1/"}
	if _, err := run.Lock("members/a").Create(ctx, leader.Record{HolderIdentity: "a"}); err != nil {
		panic(err)
	}
	inRun, _ := run.List(ctx, "members/")
	inShared, _ := shared.List(ctx, "")
	for name := range inRun {
		fmt.Println("run lists", name)
	}
	for name := range inShared {
		fmt.Println("backend lists", name)
	}
	// Output:
	// run lists members/a
	// backend lists run-1/members/a
}
