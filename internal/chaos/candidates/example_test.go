package candidates_test

import (
	"fmt"
	"time"

	"github.com/converge-go/converge/internal/chaos/candidates"
)

// A group's candidates share the backend's flags and the elector's
// timings; each gets its own identity from the group.
func ExampleTimingArgs() {
	fmt.Println(candidates.TimingArgs(2*time.Second, time.Second, 200*time.Millisecond))
	// Output: [-lease 2s -renew 1s -retry 200ms]
}

// A write that a paused candidate made is judged by whether its interval
// overlaps the pause (times are candidates.Mono readings).
func ExamplePause_Overlaps() {
	p := candidates.Pause{Stop: 100, Cont: 200}
	fmt.Println(p.Overlaps(150, 300), p.Overlaps(210, 300))
	// Output: true false
}
