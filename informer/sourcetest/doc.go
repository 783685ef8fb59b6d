// Package sourcetest is a conformance suite for informer.Source
// implementations: every backend's tests call Run, so that all sources
// share one reading of the contract on informer.Source. It imports testify
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
// through Backend.Put, Delete and Expire:
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
//
// # Where it differs from the design (docs/design/store-api.md, section 8)
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
