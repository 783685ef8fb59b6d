// Package leader will elect one leader among replicas: an elector that
// acquires, renews and releases a lease through a small Lock interface, calls
// back on gaining and losing leadership, and puts a monotonically increasing
// fencing token for the current term into the leader's context so that writes
// can be made conditional on it. It will guarantee at most one holder at any
// instant given bounded clock drift, cancel the leader's context before its
// lease can expire anywhere else, and reject invalid timings (such as a renew
// deadline not shorter than the lease duration) with a clear error. Locks for
// each backend live in sub-packages (memory, etcd, postgres, kube). The
// package is independent of the rest of the module and never depends on
// reconcile.
//
// Status: not implemented yet; see the project's issues.
package leader
