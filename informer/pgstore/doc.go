// Package pgstore keeps typed values in a PostgreSQL database as an
// informer.Store: a change log in the style of kine, in one schema created
// by Setup, with revisions taken after the changed key's row lock (so one
// key's revisions are in commit order), a reader that fills the holes left
// by aborted writers and waits for slow ones, List at a revision below
// which no hole remains, and compaction with informer.ErrRevisionExpired.
// The design, and what is not built yet (LISTEN/NOTIFY, one shared reader,
// following a user's own table, fencing), is docs/design/pgstore.md.
package pgstore
