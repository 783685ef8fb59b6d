// Package chaos holds the leader election's tests with real processes and
// real servers; it has no code of its own. Its tests build
// internal/chaos/candidate, a program that runs a reconcile.Manager with
// leader election over a lock in etcd or PostgreSQL and, while it leads,
// appends entries fenced by its term to a log in the same backend and
// reconciles (see the candidate's doc), then run several candidates and
// read the log, with package internal/chaos/candidates:
//
//   - Safety: four candidates compete for one lock while the test SIGKILLs,
//     SIGSTOPs (longer than the lease, so that another takes over, then
//     SIGCONT: a leader waking up late), SIGTERMs (just after a reconcile
//     began, which goes on within the shutdown grace) and restarts them.
//     In the log, terms never decrease, each term belongs to one identity,
//     the intervals in which the leaders of different terms acted (wrote
//     or reconciled) never overlap, and a deposed leader's late write is
//     refused by the fence.
//   - Liveness: after SIGKILL of the leader, another acts within
//     LeaseDuration plus two jittered retry periods plus a margin; after
//     SIGTERM (ReleaseOnCancel), once the old leader's reconcile has ended
//     and it has released the lock, within one jittered retry period plus a
//     margin, measured to the first accepted write of the new term.
//   - Backend faults: while etcd or PostgreSQL is down the leader steps
//     down within RenewDeadline and writes nothing, and someone leads again
//     after the server restarts; killing the raft leader of a 3-node etcd
//     cluster does not cost the leader its term; terminating the leader's
//     PostgreSQL connections does not either.
//   - Graceful stop in one process: two Managers on one etcd lock; the
//     second does not reconcile before the first's reconcile in its
//     shutdown grace has ended (manager_test.go).
//
// The tests need the servers of scripts/servers.sh (see package
// internal/testserver) and Linux; they kill and restart the shared servers,
// so they must not run in parallel with other packages' server tests
// (make test runs the server packages with -p 1):
//
//	scripts/servers.sh start; eval "$(scripts/servers.sh env)"
//	CONVERGE_INTEGRATION=1 go test -race -count=1 ./internal/chaos/...
//	scripts/servers.sh stop
package chaos
