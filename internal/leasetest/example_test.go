package leasetest_test

import (
	"fmt"
	"time"

	"github.com/converge-go/converge/internal/leasetest"
)

// Overlaps names each pair of reconciles of different terms that ran at
// once: here term 2 began before term 1's last reconcile had ended.
func ExampleOverlaps() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	done := []leasetest.Interval{
		{Replica: "a", Term: 1, Start: t0, End: t0.Add(3 * time.Second), StartSeq: 1, EndSeq: 3},
		{Replica: "b", Term: 2, Start: t0.Add(2 * time.Second), End: t0.Add(4 * time.Second), StartSeq: 2, EndSeq: 4},
	}
	for _, o := range leasetest.Overlaps(done, nil) {
		fmt.Println(o)
	}
	fmt.Println(len(leasetest.Overlaps(done[:1], nil)), "overlaps in term 1 alone")
	// Output:
	// a reconciled in term 1 from Jan  1 00:00:00.000000 to Jan  1 00:00:03.000000 while b reconciled in term 2 from Jan  1 00:00:02.000000
	// 0 overlaps in term 1 alone
}
