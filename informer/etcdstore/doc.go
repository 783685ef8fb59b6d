// Package etcdstore keeps typed values under a prefix of an etcd v3
// cluster as an informer.Store: it follows the prefix as an
// informer.Source, and reads and writes its keys with compare-and-swap.
//
// Keys are strings relative to the prefix: the etcd key "/jobs/a" under the
// prefix "/jobs/" is "a". Values are encoded by a Codec (JSON by default).
// Revisions are etcd's: List returns the header revision of its read and
// each entry's mod revision, events carry each change's mod revision, Get
// returns mod revisions, and every write returns its own revision, the one
// its event carries.
//
// # Reads and writes
//
//   - Get is one linearizable read. A value the codec cannot decode is an
//     error wrapping a *DecodeError, whose Revision lets Update overwrite it.
//   - Create, Update and Delete at a revision are each one transaction on
//     the key's mod revision (Create: 0, that is absent); a failed compare
//     is an error wrapping informer.ErrConflict that names the key's mod
//     revision, and wrote nothing. Update at revision 0 is a conflict
//     without a round trip, since etcd's compare would create the key.
//   - Delete at revision 0 is a plain delete; it returns 0 if there was
//     nothing to delete.
//
// # List and Watch
//
//   - List reads the whole prefix with one linearizable Get (no paging: etcd
//     3.4 walks the rest of the range on every page, so pages make a large
//     list several times slower).
//   - Watch watches the prefix from after+1 with progress notifications,
//     which become informer.Bookmark events (only ones that advance the
//     revision). With WithProgressInterval (off by default: see it for
//     the etcd versions where it is safe) a watch that has heard nothing
//     for that interval asks etcd for one, so an informer over a quiet
//     prefix reaches the cluster's head, which other prefixes' writes
//     move, within that interval rather than etcd's own
//     --experimental-watch-progress-notify-interval (10 minutes by
//     default). The watch requires a leader, so a member cut off from its
//     cluster ends the watch instead of silently going quiet.
//   - Deletes carry no value (the zero V): the watch does not ask etcd for
//     the previous value, which would halve its throughput, because the
//     informer delivers its own last known object on delete.
//   - A compacted start revision ends Watch with an error matching
//     informer.ErrRevisionExpired. So does a start revision beyond the
//     store's: etcd restored from a snapshot without --bump-revision hands
//     out revisions again, and a watch from the old ones would wait for
//     "future" revisions and miss every change. Watch compares after with
//     the revision etcd reports when the watch is created and in every
//     progress notification; one below after is checked with a
//     linearizable read (a member that merely lags catches up first) before
//     the watch expires. A canceled watch or a closed watch channel ends it
//     with a plain error, after which the informer watches again from the
//     last revision it saw.
//   - A value the codec cannot decode is a bad entry of its key, never a
//     stop of the stream and never a delete: List returns it as an Entry
//     with no value and Err set to a *DecodeError naming the key and its
//     mod revision, and Watch emits it as such a Put and goes on. The
//     informer keeps the key's last good value, marks the key bad (see
//     informer.Informer.BadKeys), lets every other key's changes through,
//     and takes the key's next value that decodes, or its delete, as
//     usual. (Leaving the key out of a List would tell the informer that
//     the key was deleted, and a controller would tear down what it stands
//     for; failing the List or the Watch would hold up every other key
//     until the value is fixed. A bad write, or a rolling upgrade in which
//     a newer writer uses a format the older decoder rejects, must do
//     neither.) Every bad value read is counted (DecodeErrors) and passed
//     to the WithDecodeErrorHandler callback; fix one with Update at its
//     DecodeError's Revision, or by any write of the key.
//
// The etcd client is the caller's: it owns its endpoints, TLS, timeouts and
// logger. Give it a logger (zap.NewNop() or your own): without one the v3.7
// client logs a warning for every compacted-revision error.
package etcdstore
