// Package sqlitestore keeps typed values in one SQLite file as an
// informer.Store, so that a single binary keeps its desired state across
// restarts with no server to run, and a person can read and change it with
// the sqlite3 command line.
//
// The file holds a change log in the style of kine: every Create, Update
// and Delete of any collection appends one row at the next revision, and a
// head table points at each key's current row. SQLite has one writer at a
// time (a write is a BEGIN IMMEDIATE transaction), and the log's
// AUTOINCREMENT key hands revisions out in commit order, so revisions are
// strictly increasing with no holes for a reader to resolve, and are never
// reused, not even after compaction. List reads the heads and the current
// revision in one read transaction (WAL mode gives it one snapshot); Watch
// reads the log after a revision, a page at a time.
//
// A DB (Open) is one process's handle on one file: one writer connection,
// a pool of readers, and one goroutine that checks for changes. Any number
// of Stores (New), of any collections and value types, share it. A write
// through a Store wakes the DB's Watches at once. A write from another
// connection (another process, the sqlite3 command line) is seen by a
// check of PRAGMA data_version, a counter SQLite keeps in the WAL's shared
// memory, every Options.PollInterval (100 ms by default): a running
// informer sees it within that interval plus one read of the log. The
// check costs one statement on an idle connection, about 10 µs, per
// interval.
//
// # Writing from outside
//
// The view objects (coll, key, rev, value) shows every key's current value;
// its INSTEAD OF triggers append to the log, so that another program or a
// person writes desired state with plain SQL:
//
//	sqlite3 state.db "INSERT INTO objects (coll, key, value) VALUES ('replicasets', 'web', '{\"replicas\": 3}')"
//	sqlite3 state.db "UPDATE objects SET value = '{\"replicas\": 5}' WHERE coll = 'replicasets' AND key = 'web'"
//	sqlite3 state.db "DELETE FROM objects WHERE coll = 'replicasets' AND key = 'web'"
//	sqlite3 state.db "SELECT key, rev, value FROM objects WHERE coll = 'replicasets'"
//
// These writes are blind (no compare-and-swap). Never write the log or
// head tables directly. A value that does not decode with the Store's codec
// never stops a List or a Watch: it is its key's Entry or Put with Err set
// to a *DecodeError.
//
// # Several processes
//
// Two processes may open one file: SQLite's locks serialise their writes,
// so the log stays one sequence of revisions, and each process's Watches
// see the other's writes through the poll. A write waits up to
// Options.BusyTimeout for the other writer. The file must be on a local
// file system (WAL needs shared memory; Open fails if WAL cannot be set).
// Leader election over the file is not provided: one process should own
// the reconciliation.
//
// # Durability
//
// A write returns after its transaction committed. With the default
// SynchronousFull the commit is on disk first: the write survives the
// process's death and a power loss. SynchronousNormal keeps it through the
// process's death (SIGKILL) but not necessarily a power loss; see
// Synchronous.
//
// # Compaction and identity
//
// DB.Compact deletes the log's rows at or below a revision that are no
// key's current value; a Watch after a revision below it fails with
// informer.ErrRevisionExpired, and its informer relists. A DB compacts in
// the background too, every Options.CompactInterval (5 minutes), keeping
// the last Options.CompactKeep (10 000) revisions. A new file's
// revisions start at the time of its creation in microseconds, so a file
// created anew in place of an old one hands out higher revisions. A file
// replaced by an older backup, or by another store's file, while a DB has
// it open is detected by the change check, and by the next List, Watch
// read or write of the DB (the file's store_id changed, or its highest
// revision went below one this DB saw): the DB then rebases the store, moving
// its next revision and its compaction revision above every revision it
// saw, so every Watch resuming from before fails with
// informer.ErrRevisionExpired and every informer relists.
//
// # Driver
//
// The package uses modernc.org/sqlite, SQLite translated to Go: no C
// toolchain is needed to build it. It was chosen over
// github.com/ncruces/go-sqlite3 (SQLite compiled to WebAssembly) on the
// measurements in docs/design/sqlitestore.md: a smaller binary and a faster
// cold build, for the same write and list rates.
package sqlitestore
