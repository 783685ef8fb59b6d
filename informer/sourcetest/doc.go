// Package sourcetest is a conformance suite for informer.Source and
// informer.Store implementations: every backend's tests call Run (or
// RunStore, which runs it), so that all of them share one reading of the
// contracts on informer.Source and informer.Store. It imports testify
// and is meant only for tests, like leader/locktest.
//
//	func TestSourceConformance(t *testing.T) {
//		sourcetest.Run(t, sourcetest.Suite[string, int]{
//			New: func(t *testing.T) sourcetest.Backend[string, int] {
//				s := memstore.New[string, int]()
//				return sourcetest.Backend[string, int]{Source: s, Put: ..., Delete: ..., Expire: ...}
//			},
//			Key:   func(i int) string { return fmt.Sprint("k", i) },
//			Value: func(i int) int { return i + 1 },
//		})
//	}
//
// # What Run checks
//
// Each subtest gets a fresh Backend from Suite.New and changes it only
// through Backend.Put, Delete, Expire and PutUndecodable:
//
//   - ListIsOneSnapshot: a writer sets a, then b, to the n-th value for
//     growing n; every List that runs meanwhile has b <= a <= b+1, and
//     nothing older than what had been written when it began.
//   - ChangesAfterAListHaveHigherRevisions: List at R, then writes;
//     Watch(R) emits them, every event above R.
//   - WatchFromAnyListedRevisionMissesNothing: Lists at R0..Rn between
//     random writes; Watch(Ri) replayed onto List(Ri) reaches the final
//     state. With ResumeLatestOnly, Watch(Ri) for an Ri older than the
//     latest List returns informer.ErrRevisionExpired instead.
//   - PerKeyOrder: concurrent writers; per key the Puts and Deletes emitted
//     are its writes in order (a subsequence ending with the last if
//     Coalesces), a repeated event only repeats the key's latest one, and
//     revisions, bookmarks included, never go back.
//   - DeletesCarryTheLastValueOrZero: a Delete event carries the key's last
//     value, or the zero V; exactly the last value if DeletesCarryValue.
//   - ExpiredRevisionIsErrRevisionExpired: Watch after a revision beyond
//     the store's returns informer.ErrRevisionExpired and emits nothing;
//     with Expire, Watch after a revision listed before two writes and
//     Expire returns it too, and a Watch from a List after Expire works.
//   - ConcurrentListAndWatch: 4 listers, 2 watches and a writer at once
//     (run it with -race): Lists are snapshots; each watch, replayed onto
//     its List, reaches the final state or returns ErrRevisionExpired.
//   - CancelledContextEndsWatch: a Watch ends within Suite.Wait with an
//     error that errors.Is context.Canceled, when idle, when busy and when
//     the context is done before the call; List with a done context fails.
//   - EmitErrorIsReturned: Watch returns emit's error and calls emit no
//     more.
//   - AnInformerConverges: informer.New over the Source, random writes, and
//     with Expire a stretch of writes during which the informer's watch is
//     held back, then Expire, so that it resumes from an expired revision
//     and relists. Its cache and a handler's view reach the store's state;
//     every value a handler is given, deletes' included, was written to the
//     key and is no older than the one it was given before; with Expire,
//     the informer counted an expiry.
//   - AnUndecodableValueIsABadEntryNotAStop, only if the Backend has
//     PutUndecodable: good values for keys k0..k2, List at R and a Watch
//     after R; PutUndecodable of k0 and of a new key k3, then a good Put
//     of k1. The Watch emits a Put with Err (and no Value) for k0 and k3,
//     then k1's Put, and does not end; a List then has k0 and k3 with Err
//     (Revision 0 or above R) and k1 and k2 decoded. An informer started
//     then syncs, caches k1 and k2, reports k0 and k3 bad without a
//     value, delivers k2's changes, keeps k1's last good value while a
//     bad value of it is watched, recovers every key at its next good
//     value (the handler is given it), and drops a bad key that is
//     deleted. The Watch and the informer never run at once and nothing
//     Lists while either runs, for ResumeLatestOnly.
//
// # What RunStore checks
//
// RunStore is for an informer.Store: it runs Run (subtest "Source") with
// Put and Delete done through the store's own Get, Create, Update and
// Delete, then checks the contract on informer.ReadWriter, each subtest on
// a fresh store from StoreSuite.New:
//
//   - GetAbsent: ok false, a nil error, the zero V, revision 0.
//   - CreateThenGetReturnsTheWrittenRevision, and later writes' revisions
//     are higher.
//   - CreateExistingConflictsAndWritesNothing.
//   - UpdateAtRevision: Get returns the value and the revision Update
//     returned, above the old one.
//   - UpdateStaleAbsentOrZeroConflicts: a stale revision, an absent key,
//     revision 0 (Update never creates): ErrConflict, nothing written.
//   - DeleteUnconditional: Delete at 0 of a present key returns its
//     revision; of an absent one 0 and a nil error.
//   - DeleteAtRevision: at the key's revision it deletes; at a stale one,
//     or of an absent key, ErrConflict and nothing deleted.
//   - WriteRevisionsAreTheWatchedOnes: every write's revision is that of
//     the Event Watch emits for it, with its key and type, in order.
//   - ConcurrentCASLosesNoUpdate: 8 goroutines x 50 increments by a Get
//     and Update loop retrying on ErrConflict end at 400 (run it with
//     -race). The counter n is Value(n), so Value must cover 0..400.
//   - ConcurrentCASLosesNoUpdateThroughInformerUpdate: the same, each
//     increment an informer.Update.
//   - ConflictsMatchInformerErrConflict: every kind of conflict matches
//     informer.ErrConflict with errors.Is.
//   - DoneContextFailsEveryMethodAndWritesNothing: with a context done
//     before the call every method fails with an error that errors.Is
//     context.Canceled, and the store is unchanged.
//
// The Store subtests check a key's value and revision, never the store's
// revision: a backend on a shared server (etcd) may see other writers.
//
// # Where it differs from the design (docs/design/store-api.md, Conformance)
//
//   - Expire is defined by what it does to watches, not as compaction: a
//     Watch after a revision listed before it, with at least two changes
//     since, expires; one after a revision listed after it works. (etcd
//     keeps the change at the compaction revision, memory does not, so a
//     single change does not tell them apart.) For a store with
//     history that is compaction to the current revision (memory's
//     Compact(Revision()), etcd's Compact); for a poll source, whose Watch
//     resumes only from its latest list, it is a List. That lets
//     AnInformerConverges drive the informer's relist on every backend.
//   - Holding the informer's watch back (a wrapper that ends it and makes
//     the next Watch wait) is how the informer is made to fall behind
//     Expire: an informer that keeps up with an in-memory store is never
//     behind a compaction to the current revision, and etcd delivers
//     events buffered before a compaction.
//   - Waits: every wait is bounded by Suite.Wait and waits for events, not
//     on a timer; the one exception is AnInformerConverges, which checks
//     the informer's cache every 2 ms, because the informer runs on its own
//     goroutines and the real clock.
//   - Run's subtests never run in parallel: etcd's compaction is
//     server-wide, and concurrent tests on one server would expire each
//     other's watches.
//
// Values are compared with reflect.DeepEqual, after the backend's encoding
// round trip, so Suite.Value must give values that survive it unchanged.
package sourcetest
