// Package informer keeps a local, indexed cache in step with a backend store
// and tells handlers about changes: client-go's Reflector and
// SharedIndexInformer, generic over key and value types and over the store.
//
// A store is a [Source]: it can List everything at a revision and Watch the
// changes after a revision. Backends live in sub-packages (memory, poll,
// etcd, …) so that their dependencies are compiled only by programs that use
// them; [Source]'s documentation and the package example show how to write
// one. Package informer/faults wraps any Source with seeded failures, for
// testing convergence. The package knows nothing about queues or
// controllers.
//
// # How it runs
//
// [Informer.Run] lists the source, replaces the cache with the result, and
// watches after the list's revision. A failed watch is resumed after the
// last revision seen, after an exponential backoff with jitter; a failed
// list is retried the same way. When the revision has expired (compaction,
// a store restart) it lists again and tells handlers the difference to what
// the cache held: adds, updates, and deletes carrying the last known value
// for keys that vanished in between.
//
// # Contracts
//
//   - Level-triggered: after any fault (watch dropped, revision expired,
//     list failed, handler slow) the cache converges to the store, and every
//     handler is eventually told every key's latest state. Intermediate
//     states may be coalesced.
//   - Deletes carry the last known value, also when synthesised by a
//     relist, and also when the store's Delete event has none.
//   - A slow handler never blocks another handler or the reflector: each
//     handler has its own goroutine and its own buffer, which holds at most
//     one pending change per key (so it is bounded by the number of keys,
//     not of changes) and delivers keys in the order they first became
//     pending.
//   - Coalescing per key, for changes a handler has not been given yet: add
//     then update is an add of the latest value; add then delete is nothing;
//     update then update is one update from the value the handler had;
//     update then delete is a delete with the last value; delete then add is
//     an update from the value the handler had to the new one. So what a
//     handler is told always takes its view of a key from what it was last
//     told to the cache's latest state.
//   - [Informer.HasSynced] turns true once the first full list is in the
//     cache and every handler added before then has been given all of it
//     (its methods returned); [Registration.HasSynced] says the same of one
//     handler, including one added later, whose initial state is a replay of
//     the cache as OnAdds.
//   - Duplicate events (which the Source contract allows) are skipped: an
//     event for a key at the revision the cache holds for it changes
//     nothing. Events that break the contract's revision order (one at or
//     below the revision the watch started after, or older than the key's
//     cached revision) are skipped too, but also logged and counted
//     ([Stats].Violations): they mean a store whose revisions went back
//     without its Source returning ErrRevisionExpired, and changes lost.
//   - A watch resumes after the last revision known to be complete, not
//     the last one seen: changes sharing a revision may arrive one by one,
//     and a watch that failed between them must not skip the rest. So a
//     resumed watch re-sends the last revision's events, which are skipped
//     as duplicates.
//   - A resync ([WithResync]) re-delivers every cached key to every handler
//     as an update with old == new, unless a change to it is already pending.
//   - Errors from the source are never fatal: they are wrapped with the
//     informer's name, logged, counted ([Informer.Stats]) and retried. A
//     failed list leaves the cache as it was.
//   - One bad value never stops the stream: a value the Source cannot
//     decode comes as an entry or a Put with Err set ([Entry].Err,
//     [Event].Err), not as a failed List or Watch, and it makes its key
//     bad ([BadKey]): the cache keeps the key's last good value (or has
//     none, if it never had one), the handlers are not called, every other
//     key flows, and the key recovers at its next good value or its
//     delete. Nothing is deleted because of a bad value: a list that has
//     the key with Err keeps it. A bad value is counted
//     ([Stats].DecodeErrors) and logged at Warn once per key and
//     revision, many at once in one line every 10 seconds with their
//     count (see [BadKey]); [Informer.BadKeys] and [Stats].BadKeys tell
//     which keys are bad now.
//   - A panic in the user's code (a handler's method, the transform, an
//     IndexFunc) is recovered, logged with its stack and counted
//     ([Stats].Panics), and the informer goes on with the next change: a
//     handler's change counts as delivered (see [Handler]); a value the
//     transform panics on is a bad value, as above; a watch event whose
//     value an IndexFunc panics on is skipped, so the cache keeps the
//     key's last value, and a listed entry is skipped likewise (on a
//     relist the key keeps its last value, it is not deleted); a delete is
//     applied anyway.
//   - [Registration.Remove] returns only once no call of its handler is in
//     progress; the handler is never called again.
//   - Run returns only after every goroutine it started has returned.
//
// # Cost
//
// One goroutine per handler while running, one that applies the watch's
// changes, plus one for resync if enabled.
// The cache is a map with one revision per entry, and a map of the bad
// keys, empty (nil) unless some are bad; an index costs one set
// entry per (value, key) and nothing per entry otherwise, since old values'
// index values are recomputed. Every change is pushed to every handler's
// buffer under the informer's lock: a map update and, unless the key is
// already pending, an append. A watch's changes pass through a
// buffer of up to 1024 changes: the Source's emit only appends to it, and
// a goroutine of the watch applies what is there under one hold of the
// lock (and of each handler's buffer) per batch of up to 256, so a burst
// that a Source emits back to back costs a fraction of the locking and
// wake-ups, and changes to one key within a batch reach a handler
// coalesced. A full buffer makes emit wait: a slow apply slows the
// Source, it does not grow memory. A handler added to a filled cache holds the
// lock only while the cache's map is cloned; its replay is built from the
// clone without the lock.
package informer
