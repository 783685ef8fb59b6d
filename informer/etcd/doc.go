// Package etcd follows a prefix of an etcd v3 cluster as an informer.Source,
// and offers a small typed client for the same keys.
//
// Keys are strings relative to the prefix: the etcd key "/jobs/a" under the
// prefix "/jobs/" is "a". Values are encoded by a Codec (JSON by default).
// Revisions are etcd's: List returns the header revision of its read, events
// carry each change's mod revision, and Client returns mod revisions for
// compare-and-swap.
//
// # Source
//
//   - List reads the whole prefix with one linearizable Get (no paging: etcd
//     3.4 walks the rest of the range on every page, so pages make a large
//     list several times slower).
//   - Watch watches the prefix from after+1 with progress notifications,
//     which become informer.Bookmark events (only ones that advance the
//     revision). The watch requires a leader, so a member cut off from its
//     cluster ends the watch instead of silently going quiet.
//   - Deletes carry no value (the zero V): the watch does not ask etcd for
//     the previous value, which would halve its throughput, because the
//     informer delivers its own last known object on delete.
//   - A compacted start revision ends Watch with an error matching
//     informer.ErrRevisionExpired. A canceled watch or a closed watch channel
//     ends it with a plain error, after which the informer watches again
//     from the last revision it saw.
//   - A value the codec cannot decode is skipped: counted (DecodeErrors),
//     logged with its key, and passed to the WithDecodeErrorHandler callback.
//     It never ends the watch. In a watch the informer keeps the key's last
//     good value; a List leaves the key out, so after a relist the informer
//     treats it as deleted until a decodable value is written.
//
// The etcd client is the caller's: it owns its endpoints, TLS, timeouts and
// logger. Give it a logger (zap.NewNop() or your own): without one the v3.7
// client logs a warning for every compacted-revision error.
package etcd
