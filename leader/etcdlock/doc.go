// Package etcdlock provides a leader.Lock stored in one etcd key.
//
// The record is stored as JSON under the key given to NewLock; nothing else
// is written, and the key carries no etcd lease.
//
// # Term and version
//
// Record.Version is the key's ModRevision: etcd assigns every write of the
// key a new, larger cluster revision, so two reads return the same Version
// if and only if the key was not written (or deleted and recreated) in
// between. Create is one transaction
//
//	If(CreateRevision(key) = 0) Then(Put(key, record)) Else(Get(key))
//
// and Update is
//
//	If(ModRevision(key) = old.Version) Then(Put(key, record))
//
// whose new Version is the response header's revision, the revision of the
// Put. Both are linearisable, which the elector's safety argument needs. The
// Term is a field of the JSON record, maintained by the elector (one more
// than the previous record's on every acquisition, kept on renewal); the
// Lock only stores it.
//
// # Why not an etcd lease
//
// etcd leases (and concurrency.Election built on them) expire by the etcd
// leader's clock and the client's keep-alives. This Lock deliberately does
// not use one: the elector's contract (see the leader package doc) is that a
// lease is judged only by elapsed time on each elector's own clock, counted
// from when it first saw the record's current Version, so that safety rests
// on one rule for every backend (etcd, PostgreSQL, memory) and needs only
// bounded clock rates. A key that etcd deleted on its own would also let a
// candidate create a fresh record, starting again at term 1 (which breaks
// the fencing tokens' order), while the old leader, whose renew deadline is
// counted on its clock, may still believe it leads. A crashed
// leader's record therefore stays in etcd and is taken over by a candidate
// after LeaseDuration; a record released with ReleaseOnCancel is taken over
// at once.
//
// # Fencing etcd writes
//
// A leader's work gets its term from leader.TermFromContext. A reconciler
// that writes to etcd can make each write conditional on still being the
// newest term by keeping a fence key that holds the highest term that has
// written, and putting it and its data in one transaction. The library
// does it for you: etcdstore.TermFence (leader terms) and
// etcdstore.BucketFence (a shard.Bucket's epoch) with Fence.Txn for any
// operations, or an etcdstore Store's Fenced for its typed writes. By
// hand, the transaction is:
//
//	t := fmt.Sprintf("%020d", term) // fixed width: etcd compares values as bytes
//	next := fmt.Sprintf("%020d", term+1)
//	resp, err := cli.Txn(ctx).
//	    If(clientv3.Compare(clientv3.Value(fence), "<", next)). // fence <= term
//	    Then(clientv3.OpPut(fence, t), clientv3.OpPut(dataKey, data)).
//	    Commit()
//
// (clientv3.Compare knows only "=", "!=", "<" and ">", and panics on any
// other operator, hence "< term+1" for "<= term".)
// A Value comparison on a missing key always fails, so create the fence once
// beforehand with If(CreateRevision(fence) = 0) Then(OpPut(fence, "000…0")).
// If resp.Succeeded is false a newer term has written: the deposed leader's
// write did not happen and it must stop. The check uses no clock, so it
// holds even when a deposed leader's write is delayed until after the next
// leader's acquisition. (Comparing the lock key's ModRevision instead would
// also fence, but fails after every renewal; the fence only changes with
// the term.)
package etcdlock
