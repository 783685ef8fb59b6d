// Package simtest runs a user's controllers against the memory store under
// the faults that break real controllers, and checks the end state against
// a fault-free run of the same workload: a simulation kit in a plain go
// test, after Sieve (OSDI'22) and Anvil (OSDI'24). See
// docs/design/simulation.md for the whole design; this package is its first
// slice.
//
// A Spec declares a world (fresh memory stores per run), a process (the
// informers and controllers of one incarnation of the binary, built over
// Wrap of the world's stores), a workload (steps that write desired state),
// Observe (the end state, without the fields that may differ) and
// invariants. Check runs the fault-free reference once, then, in Exhaustive
// mode, one run per write the reference made: the process crashes right
// after that write (it committed; the process never learns it) and a fresh
// process starts on the same stores, with empty caches and queues.
//
// Three oracles judge each run: the differential one (Observe equals the
// reference's), the invariants (after every workload step and liveness
// tick) and liveness (within Converge of virtual time after the workload
// nothing is written any more, and for Quiet after that nothing is written
// and no key is reconciled more than MaxReconcilesPerKey times).
//
// Each run is a testing/synctest bubble: time is virtual for the kit, the
// controllers and the user's time.Now, and synctest.Wait says exactly when
// everything is blocked, so a run of minutes of virtual time takes
// milliseconds and never sleeps. The Go scheduler's order among runnable
// goroutines is not the kit's to fix; with one worker per controller the
// writes come in the same order in practice, and a failure is rerun and
// reported as "reproduced k/3". A failure prints the schedule and a rerun
// line:
//
//	go test -run '^TestX$' -args -simtest.schedule='crash@3'
package simtest
