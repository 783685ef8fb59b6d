//go:build linux

package candidates

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/leader"
)

// Event is one line of a candidate's output, a JSON object. Times are
// CLOCK_MONOTONIC nanoseconds (see Mono).
type Event struct {
	// Ev is the kind of event: "ready" (the Manager is about to run),
	// "leading" (a term started), "write" (one append to the log),
	// "cancelled" (the term's work was told to stop), "stopped" (the
	// writing function returned), "reconciling" and "reconciled" (a
	// reconcile, with -hold, started and ended), or "exit" (the Manager's
	// Run returned, after the release if -release).
	Ev string `json:"ev"`
	// ID is the candidate's identity (its -id).
	ID string `json:"id"`
	// T is when the line was written.
	T int64 `json:"t"`
	// Term is the term of a leading, write, cancelled or stopped event.
	Term leader.Term `json:"term,omitempty"`
	// OK reports a write the backend accepted.
	OK bool `json:"ok,omitempty"`
	// Refused reports a write the fence refused. A write neither OK nor
	// Refused failed and its outcome is unknown (see Err).
	Refused bool `json:"refused,omitempty"`
	// Late marks the write made without checking the lease after the term
	// ended: the write a reconciler has in flight when it is deposed; and
	// a reconcile begun while IsLeader was false.
	Late bool `json:"late,omitempty"`
	// Start and End are the interval the write's entry records, or the
	// reconcile's; Start of a leading event is when the term began.
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`
	// Done is when the write returned.
	Done int64 `json:"done,omitempty"`
	// Err is the error of a write that failed (neither OK nor Refused), or
	// the cause of a reconcile's context cancelled before it was done.
	Err string `json:"err,omitempty"`
}

// Entry is one record of the fenced log, as a candidate appends it and the
// backend stores it.
type Entry struct {
	// Term and Identity are the writer's.
	Term     leader.Term `json:"term"`
	Identity string      `json:"identity"`
	// Start and End are the interval the writer acted in (see Event).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Late marks the write made after the term ended (see Event).
	Late bool `json:"late,omitempty"`
}

// Mono returns CLOCK_MONOTONIC in nanoseconds, the clock of the events'
// times: the same in every process of the machine, never stepped.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// TimingArgs returns the candidate's flags for an elector configuration:
// -lease, -renew and -retry.
func TimingArgs(lease, renew, retry time.Duration) []string {
	return []string{"-lease", lease.String(), "-renew", renew.String(), "-retry", retry.String()}
}
