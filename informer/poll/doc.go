// Package poll turns any function that lists objects (a REST endpoint, a
// cloud API, a directory) into an informer.Source, by listing on an interval
// and diffing each list against the one before: New for a function that
// lists values, NewEntries for one that lists keyed entries and can report
// a record it could not read.
//
// # Revisions
//
// Such a backend has no versions of its own, so a Source counts changes
// itself: every change it finds (a key that appeared, changed or vanished
// since its last list) takes the next revision, and List returns the count
// so far. The count lives in the Source, not the backend: a new Source, in
// a new process say, starts again from 0.
//
// Watch can resume only from the Source's latest list: after any other
// revision, it returns informer.ErrRevisionExpired, and the informer lists
// again and works out what it missed. That is always correct, costs a list
// that polling would make anyway, and needs no history.
//
// # Contracts
//
//   - A diff emits a Put for each key that is new or whose value changed by
//     the equality function (see WithEqual), in list order, then a Delete,
//     with the last listed value, for each key that vanished, in the order
//     of the previous list, then, if it emitted anything, an
//     informer.Bookmark at its last revision.
//   - A record the list function cannot read (a list function given to
//     NewEntries returns it as an entry with Err set) is a bad value of its
//     key, not a failed list: List has it with Err and no Value, and a diff
//     emits a Put with Err when the key turns bad or its error's text
//     changes, and a Put when it turns good again, never a Delete while it
//     is listed. A bad key that vanishes is a Delete with the zero value.
//     So one bad record never stops the others (see informer.Entry.Err).
//   - Duplicate keys in one list: the last value wins, at the position of
//     the first. Pagination over a changing collection returns duplicates
//     in practice, and failing the list would stop the informer from ever
//     converging.
//   - A list error ends Watch with that error, wrapped; the informer backs
//     off and calls Watch again, which expires only if another List or
//     Watch has listed in between. The informer resumes after the last
//     revision it knows to be complete; the bookmark that ends each diff
//     makes that the latest list's revision, so a transient error costs
//     no relist.
//   - One Source serves one informer. Concurrent calls are safe, but the
//     Source has one latest list: a List, or another Watch's poll, makes a
//     running Watch expire at its next poll, and the informer relists.
//
// # Cost
//
// Each poll calls the list function once and holds the previous list, a
// map from key to value plus the list, in memory: O(n) time and space per
// poll, plus n calls of the equality function.
package poll
