// Package memstore is converge's embedded store: a versioned, watchable map
// that a program can use as its desired-state store when it has no other,
// and that tests and simulations use in place of etcd or PostgreSQL. A
// *Store[K, V] implements informer.Store[K, V]: a Source, with Get, Create,
// Update and Delete.
//
// # Contracts
//
//   - One revision counter for the whole store: every Put, Create, Update
//     and every Delete that removes a key increments it by one, and the
//     key's mod revision (Get) becomes that revision. A new store is at
//     revision 0. Writes that change nothing (a Delete of a missing key, a
//     conflict) do not move it.
//   - Compare-and-swap on a key's mod revision: Create writes only if the
//     key does not exist, Update and Delete at a revision only if the key is
//     at it, and otherwise they return an error that errors.Is
//     informer.ErrConflict. Put is the one blind write, for seeding and
//     tests. A test store may also fail compare-and-swap writes on purpose,
//     at a rate and reproducibly (WithConflicts), so that a controller's
//     conflict path runs on it.
//   - The informer.ReadWriter methods take a context only to share the
//     contract of every backend: they do no I/O, and fail only if it is
//     done when they are called.
//   - List is one consistent snapshot: its entries are the store's state at
//     the revision it returns.
//   - Watch delivers every change after a revision, in revision order, one
//     event per revision, from a bounded history. Delete events carry the
//     deleted value. A watch whose starting point, or whose position while
//     it is behind, falls out of the history returns an error that errors.Is
//     informer.ErrRevisionExpired; see WithHistory and Store.Compact.
//   - ListAt lists the state at an older revision the history still
//     tells, for tests that serve a lagging view (a replica behind the
//     leader): list there, then Watch after it to catch up.
//   - Writers never wait for watchers: a slow watcher falls behind and,
//     once behind the history, expires instead of holding writes up.
//
// Values are stored and handed out as given, without copying. If V holds
// references (pointers, maps, slices), callers must not mutate a value after
// passing it to Put, nor a value returned by Get, List or Watch: every reader
// would see the change, without a revision or an event.
//
// # Cost
//
// Writes are O(1) amortised and do not allocate once the history has grown
// to its size, unless a watcher is waiting (then one small channel per write
// that wakes it). Get is O(1). List is O(n) in the number of keys, and holds
// a read lock while it copies them: writes wait, reads do not. Watch costs no
// goroutine of its own: it runs on its caller's, and waits on a channel that
// the next write closes. The history holds up to WithHistory changes, with
// their keys and values, so it keeps overwritten and deleted values alive
// until they age out or are compacted.
package memstore
