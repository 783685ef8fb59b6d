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
// People and other programs write a typed collection with SQL through the
// schema's patch function, one call that merges a JSON merge patch into a
// key's value, bumps its "generation" when its "spec" changed, sends the
// NOTIFY and refuses text that is not JSON (schema.sql documents it):
//
//	SELECT converge.patch('apps', 'web', '{"spec": {"replicas": 5}}');
//
// and request_delete(collection, key) deletes as informer.RequestDelete
// does (a value with finalizers is only marked deletionRequested).
//
// A value that does not decode with a collection's codec (JSON of the
// wrong shape written that way, a followed table's column whose type
// changed) never stops a List or a Watch: it is the key's Entry or Put with
// Err set to a *DecodeError, and every other key goes on.
//
// The store may share its database with a leader/pglock lease: a Fence
// makes a write conditional on the leader's term in the write's own
// transaction (Store.Fenced, Fence.Do), so a deposed leader's write is
// refused with ErrFenced.
//
// Holes are waited for, never skipped: a transaction that took a revision
// (a typed write, or a write of a followed table) and stays open holds up
// every Watch of the schema until it commits or rolls back, since the
// reader cannot tell a slow writer from a lost change otherwise. A DB whose
// reader waits longer than a second for one logs a warning (WithLogger)
// with the revision, how long it has been open and the session holding it
// (pid, user, application, state), and an info record when it ends. The
// remedy for sessions left idle in a transaction by an application is
// PostgreSQL's idle_in_transaction_session_timeout on the roles that write
// (ALTER ROLE … SET idle_in_transaction_session_timeout = '10s'), which
// ends such a session and rolls its transaction back.
//
// A DB compacts the log in the background while it watches (WithCompaction:
// every 5 minutes, keeping 10 000 revisions, by default). A schema dropped
// and set up again is a new store whose revisions start above every old
// one, so Watches resuming from the old one expire and their informers
// relist; after restoring the schema from a backup, call Rebase before
// writers come back, for the same effect. A DB whose reader meets a row
// that went back in time (a restore it was watching through) rebases the
// store by itself.
//
// The design and the measurements are in docs/design/pgstore.md.
package pgstore
