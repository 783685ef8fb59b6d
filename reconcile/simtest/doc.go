// Package simtest runs a user's controllers against the memory store under
// the faults that break real controllers, and checks the end state against
// a fault-free run of the same workload: a simulation kit in a plain go
// test, after Sieve (OSDI'22) and Anvil (OSDI'24). See
// docs/design/simulation.md for the design, its alternatives and measurements.
//
// A Spec declares a world (fresh memory stores per run), a process (the
// informers and controllers of one incarnation of the binary, built over
// Wrap of the world's stores), a workload (steps that write desired state),
// Observe (the end state, without the fields that may differ) and
// invariants. Run, a test's entry point, runs the fault-free reference
// twice (it must end the same way both times), then one run per schedule,
// fails the test with the first failure's report, and returns the report
// (Check returns it instead of failing, for a test that expects a
// failure). A step that must come after the controllers have acted on the
// one before waits with Await.
//
// A schedule puts faults at numbered writes of the processes: Crash (the
// process dies right after the write commits and a fresh one starts on
// the same stores, with empty caches and queues), Stale (a crash, and the
// fresh process's informers list behind the stores and see no change for
// Spec.StaleFor, as behind a lagging replica), Panic (after the write, in
// the reconcile), Ambiguous (the write commits, the reconciler is told
// context.DeadlineExceeded) and Depose (the process freezes before the
// write, with the timers of Process.Clock; a successor runs beside it and
// takes its lease; then the frozen write and a second of the old term's
// work go out). Process.Effect makes an action outside the stores a
// numbered write too. And it puts faults on what the informers are sent,
// through informer/faults: coalescing windows (a key's intermediate
// values are never seen), duplicates and expiries. Exhaustive mode crashes
// after each write of the reference in turn; Sampled mode draws Runs
// schedules from one seed, and shrinks a failing one.
//
// Three oracles judge each run: the differential one (Observe equals the
// reference's), the invariants (after every workload step, every liveness
// tick, and right after a deposed process's late writes; Converged ones
// once, after the system has converged) and liveness
// (once the source faults stop, within Converge of virtual time nothing is
// written for Idle, and for Quiet after that nothing is written and no key
// is reconciled more than MaxReconcilesPerKey times; work declared in
// Spec.Periodic, a heartbeat or a re-check, is held to its period
// instead).
//
// Each run is a testing/synctest bubble: time is virtual for the kit, the
// controllers and the user's time.Now, and synctest.Wait says exactly when
// everything is blocked, so a run of minutes of virtual time takes
// milliseconds and never sleeps. Every List and watch event of a wrapped
// store and every reconcile of a Count-wrapped reconciler passes a gate that
// lets one through at a time, once the one before has settled, in an order
// of the kit's (store, revision, key; controller, key), not the Go
// scheduler's: with one worker per controller a schedule replays the same
// writes. What happens at one instant without passing the gate (two timers
// of a process) is still the scheduler's, so a failure is rerun and
// reported as "reproduced k/3". A failure prints the shrunk schedule, the
// writes at its faults and those a deposed or stale process made while it
// was so, the keys two processes fought over, and a rerun line:
//
//	go test -run '^TestX$' -args -simtest.schedule='seed=3 stale@2:1 coalesce=1s'
package simtest
