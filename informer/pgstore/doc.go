// Package pgstore keeps typed values in a PostgreSQL database as an
// informer.Store: a change log in the style of kine, in one schema created
// by Setup, with revisions taken after the changed key's row lock (so one
// key's revisions are in commit order), a reader that fills the holes left
// by aborted writers and waits for slow ones, List at a revision below
// which no hole remains, and compaction with informer.ErrRevisionExpired.
//
// A DB is one process's reader of one schema: every Store on it, and every
// Watch of those Stores, share one poll loop and one LISTEN connection.
// Writes send a NOTIFY after they commit (never inside their transaction,
// which would serialise commits), throttled to one per millisecond; the
// reader also polls, every second while LISTEN is up and every 10 ms
// without it (WithPollOnly, for PgBouncer's transaction pooling, or while
// the LISTEN connection is down).
//
// A user's own table joins the same log through Follow: triggers (in
// follow.sql) append every INSERT, UPDATE, DELETE and TRUNCATE of it, by any
// client, keyed by its primary key, and a TableSource watches it as a
// Store's collection, values decoded from the row's JSON.
//
// The store may share its database with a leader/pglock lease: a Fence
// makes a write conditional on the leader's term in the write's own
// transaction (Store.Fenced, Fence.Do), so a deposed leader's write is
// refused with ErrFenced.
//
// The design, measurements, and what is not built yet (the identity rebase
// after a restore, the background compactor) are in docs/design/pgstore.md.
package pgstore
