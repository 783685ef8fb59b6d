package simtest_test

import (
	"fmt"

	"github.com/converge-go/converge/reconcile/simtest"
)

// A failure prints its schedule; ParseSchedule reads it back, and
// -simtest.schedule reruns that one schedule.
func ExampleParseSchedule() {
	s, err := simtest.ParseSchedule("seed=3 stale@2:1 crash@5 coalesce=1s")
	if err != nil {
		panic(err)
	}
	for _, f := range s.Faults {
		fmt.Printf("%s after write %d\n", f.Kind, f.At)
	}
	fmt.Println(s.Coalesce, s)
	// Output:
	// stale after write 2
	// crash after write 5
	// 1s seed=3 stale@2:1 crash@5 coalesce=1s
}
