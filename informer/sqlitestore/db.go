package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/converge-go/converge/informer"
)

//go:embed schema.sql
var schema string

// Synchronous is SQLite's synchronous setting, which says when a commit
// reaches the disk. In WAL mode (which Open always sets):
//
//   - SynchronousFull (the default): a commit is on disk before the write
//     returns. An acknowledged write survives the process's death and a
//     power loss or kernel crash.
//   - SynchronousNormal: the WAL is synced only at checkpoints. An
//     acknowledged write survives the process's death (SIGKILL, a panic),
//     since it is in the operating system's cache, but the last writes
//     before a power loss or kernel crash may be lost (the file stays
//     consistent). Writes are several times faster.
//   - SynchronousOff: no sync at all; as Normal for the process's death, and
//     a power loss may lose more, up to a corrupted file.
//   - SynchronousExtra: as Full, and also syncs the directory after a
//     journal file is deleted.
type Synchronous string

// The Synchronous levels; see Synchronous.
const (
	SynchronousOff    Synchronous = "OFF"
	SynchronousNormal Synchronous = "NORMAL"
	SynchronousFull   Synchronous = "FULL"
	SynchronousExtra  Synchronous = "EXTRA"
)

// Default option values.
const (
	DefaultPollInterval = 100 * time.Millisecond
	DefaultBusyTimeout  = 5 * time.Second
	// DefaultCompactInterval and DefaultCompactKeep are kine's and the
	// Kubernetes API server's habit: every few minutes, keeping enough
	// history that an informer that blinked resumes its Watch instead of
	// relisting.
	DefaultCompactInterval = 5 * time.Minute
	DefaultCompactKeep     = 10_000
)

// compactStep is how many revisions one background compaction transaction
// covers at most: the transaction holds the file's write lock, and every
// writer waits for it.
const compactStep = 10_000

// Options configures Open. The zero value is valid: every field has a
// documented default.
type Options struct {
	// Synchronous says when a commit reaches the disk (see Synchronous).
	// Default: SynchronousFull.
	Synchronous Synchronous
	// PollInterval is how often the DB checks whether another connection
	// (another process, or the sqlite3 command line) changed the file,
	// with PRAGMA data_version, a read of a counter in shared memory that
	// costs microseconds. Writes through this DB's own Stores wake its
	// Watches at once, without waiting for a poll; a write from outside is
	// seen within PollInterval plus the time to read it. The check also
	// detects a file replaced by a backup (see the package documentation).
	// Must not be negative. Default: DefaultPollInterval.
	PollInterval time.Duration
	// BusyTimeout is how long a statement waits for a lock held by
	// another connection (another process writing, a checkpoint) before
	// it fails with SQLITE_BUSY. Must not be negative. Default:
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// CompactInterval is how often the DB compacts the log in the
	// background, keeping the last CompactKeep revisions (of every
	// collection) and every key's current value, in transactions of at
	// most 10 000 revisions each; a Watch further behind fails with
	// informer.ErrRevisionExpired and its informer relists. Negative: no
	// background compaction (call DB.Compact). Default:
	// DefaultCompactInterval.
	CompactInterval time.Duration
	// CompactKeep is how many revisions below the current one the
	// background compaction keeps. Must not be negative. Default:
	// DefaultCompactKeep.
	CompactKeep int
}

func (o *Options) validate() error {
	switch o.Synchronous {
	case "":
		o.Synchronous = SynchronousFull
	case SynchronousOff, SynchronousNormal, SynchronousFull, SynchronousExtra:
	default:
		return fmt.Errorf("Options.Synchronous %q: want one of OFF, NORMAL, FULL, EXTRA (or empty for FULL)", string(o.Synchronous))
	}
	if o.PollInterval < 0 {
		return fmt.Errorf("Options.PollInterval %v: must not be negative (0 means %v)", o.PollInterval, DefaultPollInterval)
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.BusyTimeout < 0 {
		return fmt.Errorf("Options.BusyTimeout %v: must not be negative (0 means %v)", o.BusyTimeout, DefaultBusyTimeout)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.CompactInterval == 0 {
		o.CompactInterval = DefaultCompactInterval
	}
	if o.CompactKeep < 0 {
		return fmt.Errorf("Options.CompactKeep %d: must not be negative (0 means %d)", o.CompactKeep, DefaultCompactKeep)
	}
	if o.CompactKeep == 0 {
		o.CompactKeep = DefaultCompactKeep
	}
	return nil
}

// ErrClosed is returned by the methods of a Store whose DB was closed.
var ErrClosed = errors.New("sqlitestore: the DB is closed")

// DB is one SQLite file opened by Open: the log every Store on it shares,
// one writer connection and a pool of readers. It is safe for concurrent
// use. Close it when done.
type DB struct {
	path string
	opts Options
	w    *sql.DB // one connection, BEGIN IMMEDIATE: every write of this process
	r    *sql.DB // readers: List, Watch, Get

	mu      sync.Mutex
	storeID string        // the identity this DB follows
	high    int64         // highest revision known to be handed out
	wake    chan struct{} // closed and replaced on every change seen
	closed  bool

	stop      context.CancelFunc
	done      chan struct{}
	closedCh  chan struct{}
	closeOnce sync.Once
}

// Open opens (creating it if absent) the SQLite database at path, in WAL
// mode, sets up its schema, and starts the DB's change check (see
// Options.PollInterval), which runs until Close. ctx bounds the setup only.
// path is a plain file name (not a file: URI), taken as it is.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlitestore: Open: empty path")
	}
	if strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: Open %q: want a plain file name, not a file: URI", path)
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: Open %q: %w", path, err)
	}
	// The driver opens a file: URI, which SQLite percent-decodes.
	uriPath := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)",
		uriPath, opts.BusyTimeout.Milliseconds(), opts.Synchronous)
	w, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open %q: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: Open %q: %w", path, err)
	}
	r.SetMaxIdleConns(4)
	db := &DB{path: path, opts: opts, w: w, r: r, wake: make(chan struct{}), done: make(chan struct{}), closedCh: make(chan struct{})}
	if err := db.setup(ctx); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, fmt.Errorf("sqlitestore: Open %q: %w", path, err)
	}
	pollCtx, stop := context.WithCancel(context.Background())
	db.stop = stop
	go db.poll(pollCtx)
	return db, nil
}

// setup creates the schema and, in a new file, the store's identity and
// its first revision.
func (db *DB) setup(ctx context.Context) error {
	var mode string
	if err := db.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not WAL (a file system without shared memory?)", mode)
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM meta").Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		// A new store's revisions start at the current time in
		// microseconds, so that a file created anew in place of an old one
		// hands out revisions above every old one.
		base := time.Now().UnixMicro()
		if _, err := tx.ExecContext(ctx, "INSERT INTO sqlite_sequence (name, seq) VALUES ('log', ?)", base); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO meta (id, store_id, compact_rev) VALUES (1, ?, ?)", newID(), base); err != nil {
			return err
		}
	}
	id, seq, err := identity(ctx, tx)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	db.storeID, db.high = id, seq
	return nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// identity reads the store's identity and its highest revision.
func identity(ctx context.Context, q querier) (id string, seq int64, err error) {
	st, err := readState(ctx, q)
	return st.id, st.seq, err
}

// state is what every read checks first: the store's identity, its
// highest revision and its compaction revision.
type state struct {
	id             string
	seq, compacted int64
}

func readState(ctx context.Context, q querier) (st state, err error) {
	err = q.QueryRowContext(ctx,
		"SELECT m.store_id, s.seq, m.compact_rev FROM meta m, sqlite_sequence s WHERE m.id = 1 AND s.name = 'log'").
		Scan(&st.id, &st.seq, &st.compacted)
	if errors.Is(err, sql.ErrNoRows) {
		err = errors.New("the file has no converge store in it (meta or sqlite_sequence empty)")
	}
	return st, err
}

// stale reports whether a read that began after highWater returned h saw
// another store, or one that went back in time: then the reader rebases
// (see rebase) before it answers.
func (db *DB) stale(st state, h int64) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return st.id != db.storeID || st.seq < h
}

// Path returns the file name the DB was opened with.
func (db *DB) Path() string { return db.path }

// Close stops the change check, ends every Watch of the DB's Stores (with
// ErrClosed) and closes the connections. It is safe to call more than once.
func (db *DB) Close() error {
	var err error
	db.closeOnce.Do(func() {
		db.stop()
		<-db.done
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		close(db.closedCh)
		err = errors.Join(db.w.Close(), db.r.Close())
	})
	return err
}

// changed returns a channel closed at the next change seen by the DB.
func (db *DB) changed() <-chan struct{} {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.wake
}

// notify wakes every Watch, and raises the revision known handed out.
func (db *DB) notify(rev int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.high = max(db.high, rev)
	close(db.wake)
	db.wake = make(chan struct{})
}

// raise raises the revision known handed out to rev, without waking the
// Watches.
func (db *DB) raise(rev int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.high = max(db.high, rev)
}

func (db *DB) highWater() int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.high
}

// poll checks PRAGMA data_version, which changes when another connection
// commits to the file, and wakes the Watches when it does.
func (db *DB) poll(ctx context.Context) {
	defer close(db.done)
	conn, err := db.r.Conn(ctx)
	if err != nil {
		return // only at Close
	}
	defer func() { _ = conn.Close() }()
	t := time.NewTicker(db.opts.PollInterval)
	defer t.Stop()
	var compact <-chan time.Time // nil: off
	if db.opts.CompactInterval > 0 {
		ct := time.NewTicker(db.opts.CompactInterval)
		defer ct.Stop()
		compact = ct.C
	}
	last := int64(-1)
	for {
		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err == nil && v != last {
			last = v
			// An error leaves the check to the next change or tick;
			// a Watch reports its own read errors.
			_ = db.check(ctx, conn)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-compact:
			// A failure is tried again at the next tick: compaction is
			// housekeeping.
			_ = db.compactOld(ctx)
		}
	}
}

// compactOld compacts the log up to CompactKeep revisions below the
// current one, in steps of compactStep revisions.
func (db *DB) compactOld(ctx context.Context) error {
	var seq, compacted int64
	if err := db.r.QueryRowContext(ctx, "SELECT s.seq, m.compact_rev FROM sqlite_sequence s, meta m WHERE s.name = 'log' AND m.id = 1").Scan(&seq, &compacted); err != nil {
		return err
	}
	target := seq - int64(db.opts.CompactKeep)
	for at := compacted; at < target; {
		at = min(at+compactStep, target)
		if _, err := db.Compact(ctx, informer.Revision(at)); err != nil {
			return err
		}
	}
	return nil
}

// check compares the file's identity and highest revision with what this
// DB knows, rebases the store if the file was replaced or went back in
// time, and wakes every Watch.
func (db *DB) check(ctx context.Context, q querier) error {
	h := db.highWater() // every revision up to h committed before this read
	st, err := readState(ctx, q)
	if err != nil {
		return err
	}
	if db.stale(st, h) {
		if err := db.rebase(ctx, h); err != nil {
			return err
		}
	}
	db.notify(st.seq)
	return nil
}

// rebase makes the file's next revision, and its compaction revision,
// higher than every revision this DB has handed out or seen (h and
// above), and adopts the file's identity: a Watch resuming from before
// fails with ErrRevisionExpired, and its informer relists.
func (db *DB) rebase(ctx context.Context, h int64) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	id, seq, err := identity(ctx, tx)
	if err != nil {
		return err
	}
	next := max(seq, h, db.highWater()) + 1
	if _, err := tx.ExecContext(ctx, "UPDATE sqlite_sequence SET seq = ? WHERE name = 'log'", next); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET compact_rev = ? WHERE id = 1", next); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	db.mu.Lock()
	db.storeID = id
	db.mu.Unlock()
	db.notify(next)
	return nil
}

// Revision returns the store's current revision: that of its latest
// change (of any collection), or of its creation or latest rebase.
func (db *DB) Revision(ctx context.Context) (informer.Revision, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'log'").Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore %q: revision: %w", db.path, err)
	}
	return informer.Revision(seq), nil
}

// Compact forgets the history of every collection up to rev (0: the
// current revision): it deletes the log's rows at or below rev that are
// no key's current value, and a Watch after a revision below rev then
// fails with informer.ErrRevisionExpired. A Watch after rev itself, or
// after any later revision, still works. Compacting below an earlier
// compaction changes nothing. It returns the compaction revision, and
// fails for a rev above the current revision.
func (db *DB) Compact(ctx context.Context, rev informer.Revision) (informer.Revision, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore %q: compact: %w", db.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	var seq, compacted int64
	if err := tx.QueryRowContext(ctx, "SELECT s.seq, m.compact_rev FROM sqlite_sequence s, meta m WHERE s.name = 'log' AND m.id = 1").Scan(&seq, &compacted); err != nil {
		return 0, fmt.Errorf("sqlitestore %q: compact: %w", db.path, err)
	}
	target := int64(rev)
	if rev == 0 {
		target = seq
	}
	if target > seq {
		return 0, fmt.Errorf("sqlitestore %q: compact at %d: above the current revision %d", db.path, target, seq)
	}
	if target <= compacted {
		return informer.Revision(compacted), nil
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM log WHERE rev <= ? AND rev NOT IN (SELECT rev FROM head)", target); err != nil {
		return 0, fmt.Errorf("sqlitestore %q: compact: %w", db.path, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET compact_rev = ? WHERE id = 1", target); err != nil {
		return 0, fmt.Errorf("sqlitestore %q: compact: %w", db.path, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlitestore %q: compact: %w", db.path, err)
	}
	db.notify(0)
	return informer.Revision(target), nil
}
