// Package failover holds an integration test of the reconcile.Manager with
// leader election across real processes: replicas of a small controller,
// each a process running this package's test binary, share an etcd lock and
// an etcd store; the test SIGKILLs the leader and checks that another replica
// takes over and reconciles every key. It has no non-test code.
package failover
