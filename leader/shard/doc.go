// Package shard splits work across replicas: keys fall into a fixed
// number of buckets (BucketOf: FNV-1a-64 of the key's bytes modulo the
// bucket count), each bucket is held by at most one replica at a time, and
// only the holder of a key's bucket works on the key. A Sharder holds each
// bucket with an ordinary leader.Elector on its own record, so the
// bucket's leader.Term is its epoch, and runs the registered Handlers
// (a sharded reconcile.Controller is one) while it holds it.
//
// # Who should hold what
//
// Each replica keeps a membership record alive (an Elector on
// "<Name>/members/<Identity>") and lists the members every ListPeriod,
// judging each as an elector judges a lease: live until its record has
// not changed for LeaseDuration by this replica's clock, gone at once once
// released. Assign (bounded-load rendezvous hashing over the live members)
// names each bucket's desired owner; a replica campaigns for the buckets
// it should own, and gives up those it should not: it cancels the
// Handlers' stop context, waits for them to return (they drain the
// bucket's work), and only then releases the lease, which the new owner,
// already campaigning, takes at its next retry. A replica also campaigns
// for the buckets it would own if members silent for SuspectAfter were
// gone, so that its elector has been timing their bucket records by the
// time they expire: a crashed member's buckets move within about
// SuspectAfter + ListPeriod + LeaseDuration + RetryPeriod×JitterFactor,
// not two lease durations.
//
// # Safety
//
// Membership is advice only. A replica acts on a bucket only while its
// Elector holds the bucket's lease, so the leader package's argument
// carries over bucket by bucket: given clock rates within its drift bound,
// no two replicas' Handlers act on one bucket at once, and a holder's
// lease context is cancelled before anyone else can acquire. A wrong or
// stale view of the members costs only time: a bucket campaigned for by a
// replica that should not own it is taken only once its holder's lease has
// lapsed, and a bucket given up early waits for its rightful owner.
//
// # Fencing
//
// A lease cannot stop a process that is paused (SIGSTOP, a frozen VM)
// longer than LeaseDuration−RenewDeadline from writing when it resumes,
// before its watchdog runs. Every Handler context, and every sharded
// reconcile's, carries the Bucket with its Epoch (FromContext): a write
// made conditional on the epoch (an etcd transaction comparing a fence key
// per bucket, "UPDATE … WHERE fence_epoch <= $epoch" in SQL, raised by
// the new holder before it acts) is refused once a later epoch of the
// bucket has written, with no clock involved: etcdstore.BucketFence and
// pgstore.Fence are these writes for etcd and PostgreSQL. A Handler checks
// leader.LeaseValid(lease) before it starts a piece of work, so that a
// resumed process starts none on a lease that lapsed during its pause; the
// fence refuses what was already under way. See docs/design/sharding.md
// for the protocol, the argument in full, the liveness bounds and what is
// measured.
//
// Backends: leader/memlock.Locks (tests, one process), leader/etcdlock.Locks
// and leader/pglock.Locks implement Backend.
package shard
