package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the DB options.
const (
	// DefaultPollInterval is how often the reader polls the log while its
	// LISTEN connection is up: NOTIFY wakes it for every change, the poll is
	// only a safety net for a lost notification.
	DefaultPollInterval = time.Second
	// DefaultFastPollInterval is how often the reader polls without a
	// LISTEN connection: in poll-only mode, and while that connection is
	// down (killed, server restarting) until it is back.
	DefaultFastPollInterval = 10 * time.Millisecond
	// DefaultNotifyInterval is the least time between two NOTIFYs this
	// process sends after its writes.
	DefaultNotifyInterval = time.Millisecond
	// DefaultFillAfter is how long a hole may stay before the reader fills
	// it: a typed write commits well within it, so a fill rarely races one.
	DefaultFillAfter = 5 * time.Millisecond
	// DefaultBatch is how many log rows the reader reads per query.
	DefaultBatch = 1000
	// DefaultBuffer is how many rows a Watch may have waiting before it
	// leaves the shared stream and catches up on its own queries.
	DefaultBuffer = 10 * DefaultBatch
)

// ErrClosed is the error (wrapped) of a Watch ended by DB.Close.
var ErrClosed = errors.New("pgstore: DB closed")

// DBOption configures a DB.
type DBOption func(*dbOptions)

type dbOptions struct {
	schema                  string
	poll, fastPoll, notify  time.Duration
	fillAfter               time.Duration
	batch, buffer           int
	pollOnly, notifyOff     bool
	logger                  *slog.Logger
	reconnectMin, reconnMax time.Duration
	compactEvery            time.Duration // < 0: no background compactor
	compactKeep             uint64
	compactSet              bool // WithCompaction was given
}

// WithSchema sets the schema holding the store's objects, the one given to
// Setup. Default: DefaultSchema.
func WithSchema(name string) DBOption { return func(o *dbOptions) { o.schema = name } }

// WithPollInterval sets how often the reader polls while LISTEN is up.
// Default: DefaultPollInterval.
func WithPollInterval(d time.Duration) DBOption { return func(o *dbOptions) { o.poll = d } }

// WithFastPollInterval sets how often the reader polls without LISTEN (in
// poll-only mode, or while the LISTEN connection is down). Default:
// DefaultFastPollInterval. Each poll is one indexed query per process, however
// many Watches there are.
func WithFastPollInterval(d time.Duration) DBOption { return func(o *dbOptions) { o.fastPoll = d } }

// WithPollOnly turns LISTEN off: the reader polls every fast poll interval
// and holds no dedicated connection. Use it behind PgBouncer in transaction
// pooling mode, where LISTEN silently stops working. Default: off (LISTEN on).
// Writes of this process still wake its own reader at once.
func WithPollOnly() DBOption { return func(o *dbOptions) { o.pollOnly = true } }

// WithNotifyInterval sets the least time between two NOTIFYs sent after this
// process's writes (a write that comes sooner rides on the next one); d < 0
// sends none (no other process then hears of this one's writes before it
// polls). A NOTIFY is sent only while some DB's LISTEN connection on the
// schema is up (one of this process counts too); a DB that LISTENs after a
// write reads the log before it waits for NOTIFYs. Default:
// DefaultNotifyInterval.
func WithNotifyInterval(d time.Duration) DBOption {
	return func(o *dbOptions) {
		if d < 0 {
			o.notifyOff = true
		}
		o.notify = d
	}
}

// WithFillAfter sets how long a hole may stay before the reader fills it.
// Default: DefaultFillAfter.
func WithFillAfter(d time.Duration) DBOption { return func(o *dbOptions) { o.fillAfter = d } }

// WithBatch sets how many log rows the reader reads per query. Default:
// DefaultBatch.
func WithBatch(n int) DBOption { return func(o *dbOptions) { o.batch = n } }

// WithBuffer sets how many rows a Watch may have waiting for its emit before
// it leaves the shared stream and catches up alone. Default: DefaultBuffer.
func WithBuffer(n int) DBOption { return func(o *dbOptions) { o.buffer = n } }

// WithLogger sets where the DB logs its LISTEN connection's failures and
// failed NOTIFYs (neither loses a change). Default: slog.Default().
func WithLogger(l *slog.Logger) DBOption { return func(o *dbOptions) { o.logger = l } }

// DB is one process's reader of one schema: every Store made with it (any
// collection, any value type) and every Watch on those Stores share one
// poll loop, one LISTEN connection and one notifier, so N informers cost one
// query per wake-up, not N. Make one per schema per process and share it.
//
// The reader, its LISTEN connection and its background compactor
// (WithCompaction) run only while at least one Watch does: the first Watch
// starts them, the last one to return stops them. A
// reader error (a dropped connection, a server restart) ends the Watches
// it serves with that error, as informer.Source allows; their informers
// watch again after their last revision. A dropped LISTEN connection ends
// nothing: the reader polls every fast poll interval until it is back.
//
// It is safe for concurrent use. It does not own the pool.
type DB struct {
	pool   *pgxpool.Pool
	schema string // unquoted: also the NOTIFY channel
	// id is the payload of this DB's NOTIFYs, so that its LISTEN connection
	// can tell its own: they announce only writes its reader was told of.
	id   string
	q    queries
	opts dbOptions

	mu      sync.Mutex
	closed  bool
	subs    map[*sub]struct{}
	gen     uint64             // of the running reader; bumped when it stops
	running bool               // a reader runs (generation gen)
	cursor  int64              // every revision up to it is resolved and published
	stop    context.CancelFunc // of the running reader
	wake    chan struct{}      // cap 1: read the log now
	colls   map[string]int     // collections watched, with their Watch counts
	anchor  anchor             // the last row the reader read (anchor.go); zero: none
	wg      sync.WaitGroup     // reader and listener goroutines

	// local holds this process's commits the reader has not passed, by
	// revision, for the hand-off (local.go); guarded by mu. Every key was
	// above cursor when added; at most buffer of them. localWake (cap 1):
	// one was added.
	local     map[int64]localRow
	localWake chan struct{}
	// lastRead holds the transaction of every row the last read that
	// passed rows passed, by revision (guarded by mu): a recorded commit
	// found there was overtaken by that read, not handed out again.
	lastRead map[int64]int64

	listenGen atomic.Uint64 // the generation of the reader whose LISTEN connection is up; 0: none
	resolved  atomic.Int64  // every revision up to it is a row or compacted (List's lower bound)

	nmu      sync.Mutex
	pending  bool // a NOTIFY is scheduled and not yet started
	nclosed  bool // Close was called: schedule no more
	lastSent time.Time
	nwg      sync.WaitGroup // NOTIFYs in flight
	// sendMu keeps a DB's NOTIFY tries one at a time: two in flight would
	// hold the listeners' lock against each other, and the one refused it
	// would take that for a listener and notify no one for nothing.
	sendMu sync.Mutex

	trace tracer // nil but in the stage benchmark; set before the first Watch
}

// NewDB returns the DB of the schema (WithSchema) in pool's database. It
// does not touch the database: call Setup first, once. It returns an error
// for a nil pool, a nil option, and a schema name that is not valid (see
// WithSchema), such as one longer than PostgreSQL's 63 bytes.
func NewDB(pool *pgxpool.Pool, opts ...DBOption) (*DB, error) {
	if pool == nil {
		return nil, errors.New("pgstore.NewDB: nil pool")
	}
	db := &DB{pool: pool, subs: make(map[*sub]struct{}), wake: make(chan struct{}, 1), localWake: make(chan struct{}, 1), colls: make(map[string]int)}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("pgstore.NewDB: option %d is nil", i)
		}
		o(&db.opts)
	}
	o := &db.opts
	if o.schema == "" {
		o.schema = DefaultSchema
	}
	if o.poll <= 0 {
		o.poll = DefaultPollInterval
	}
	if o.fastPoll <= 0 {
		o.fastPoll = DefaultFastPollInterval
	}
	if o.notify == 0 {
		o.notify = DefaultNotifyInterval
	}
	if o.fillAfter <= 0 {
		o.fillAfter = DefaultFillAfter
	}
	if o.batch <= 0 {
		o.batch = DefaultBatch
	}
	if o.buffer <= 0 {
		o.buffer = DefaultBuffer
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	o.reconnectMin, o.reconnMax = 20*time.Millisecond, 2*time.Second
	if o.compactEvery == 0 {
		o.compactEvery = DefaultCompactInterval
	}
	if !o.compactSet {
		o.compactKeep = DefaultCompactKeep
	}
	if err := checkSchema(o.schema); err != nil {
		return nil, fmt.Errorf("pgstore.NewDB: %w", err)
	}
	db.schema = o.schema
	db.id = rand.Text()
	db.q = newQueries(quoteSchema(o.schema), o.batch)
	return db, nil
}

// noteResolved records that every revision up to r is resolved.
func (db *DB) noteResolved(r int64) {
	for {
		old := db.resolved.Load()
		if old >= r || db.resolved.CompareAndSwap(old, r) {
			return
		}
	}
}

// wrapErr adds context to a database error, and the hint to call Setup if
// the schema's objects are missing.
func (db *DB) wrapErr(op string, err error) error {
	if missing(err) {
		return fmt.Errorf("pgstore schema %q: %s: %w (call pgstore.Setup)", db.schema, op, err)
	}
	return fmt.Errorf("pgstore schema %q: %s: %w", db.schema, op, err)
}

// Schema returns the schema the DB reads.
func (db *DB) Schema() string { return db.schema }

// Close ends every Watch on the DB (each returns an error matching
// ErrClosed), stops the reader and the LISTEN connection, and waits for
// them and for a NOTIFY in flight. Writes through the DB's Stores still
// work afterwards (the pool is the caller's) but notify no one; a Watch
// started after Close returns ErrClosed. Calling Close is optional once every
// Watch has returned; calling it twice is harmless.
func (db *DB) Close() {
	db.mu.Lock()
	db.closed = true
	for s := range db.subs {
		db.endLocked(s, ErrClosed)
	}
	db.stopLocked()
	db.mu.Unlock()
	db.nmu.Lock()
	db.nclosed = true
	db.nmu.Unlock()
	db.wg.Wait()
	db.nwg.Wait()
}

// kick wakes the reader to poll now.
func (db *DB) kick() {
	select {
	case db.wake <- struct{}{}:
	default:
	}
}

// wrote is called after a write of this process committed that is not
// handed off to the reader (committed, local.go): it wakes the local
// reader to read the log, and schedules a NOTIFY for the other processes.
func (db *DB) wrote() {
	if db.trace != nil {
		db.trace.Wake(true, time.Now())
	}
	db.kick()
	db.notifyOthers()
}

// notifyOthers schedules one NOTIFY for the other processes at most every
// notify interval. The NOTIFY is a statement of its own, not part of the
// write's transaction, because PostgreSQL serialises the commits of
// notifying transactions on one lock (docs/design/pgstore.md, Alternatives measured).
func (db *DB) notifyOthers() {
	if db.opts.notifyOff {
		return
	}
	db.nmu.Lock()
	defer db.nmu.Unlock()
	if db.pending || db.nclosed {
		return // a NOTIFY not yet sent covers this write, or closed
	}
	db.pending = true
	db.nwg.Add(1)
	time.AfterFunc(max(0, db.opts.notify-time.Since(db.lastSent)), db.sendNotify)
}

// listenersLock is the first key of the advisory lock that marks the
// sessions LISTENing on a schema: every DB's LISTEN connection holds it
// shared, on (listenersLock, hashtext(schema)), for as long as it is up.
// (The two-int4 keys are apart from the one-bigint keys of Setup's lock.)
const listenersLock = 0x63766c6e // "cvln"

// notifyIfListened is the NOTIFY after writes, sent only if a session
// holds the listeners' lock: an exclusive try of it fails exactly then (or
// while another DB's try holds it, which sends a NOTIFY too many; a DB's
// own tries are one at a time, sendMu).
// With no listener anywhere, the statement is a lock try that commits
// nothing, not a notifying commit (docs/design/pgstore.md, Alternatives measured). No wake-up
// is lost to a listener that comes after the try: it takes the lock and
// LISTENs before its reader reads the log, and this write committed before
// the try.
var notifyIfListened = `SELECT pg_notify($1, $2) WHERE NOT pg_try_advisory_xact_lock(` +
	strconv.Itoa(listenersLock) + `, hashtext($1))`

func (db *DB) sendNotify() {
	defer db.nwg.Done()
	db.nmu.Lock()
	db.pending = false // from now on a write needs a NOTIFY of its own
	db.lastSent = time.Now()
	db.nmu.Unlock()
	db.sendMu.Lock()
	defer db.sendMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := db.pool.Exec(ctx, notifyIfListened, db.schema, db.id); err != nil {
		db.opts.logger.Debug("pgstore: NOTIFY failed; other processes see the write at their next poll",
			"schema", db.schema, "err", err)
	}
}

// listen holds the LISTEN connection until ctx is done, reconnecting with
// backoff, and wakes the reader on every notification and after every
// (re)connect: notifications sent while it was down are lost.
func (db *DB) listen(ctx context.Context, gen uint64) {
	defer db.wg.Done()
	defer db.listenGen.CompareAndSwap(gen, 0)
	wait := db.opts.reconnectMin
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, gen, func() { wait = db.opts.reconnectMin })
		db.listenGen.CompareAndSwap(gen, 0)
		db.kick() // poll fast from now until LISTEN is back
		if ctx.Err() != nil {
			return
		}
		db.opts.logger.Warn("pgstore: LISTEN connection lost; polling until it is back",
			"schema", db.schema, "err", err, "retry_in", wait)
		if sleep(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, db.opts.reconnMax)
	}
}

// listenOnce connects, LISTENs and waits for notifications until the
// connection fails or ctx is done. The connection comes from the pool (so
// the pool's connect hooks apply) and is hijacked, so the pool can open
// another in its place instead of losing a slot to it.
func (db *DB) listenOnce(ctx context.Context, gen uint64, connected func()) error {
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// The lock first, then LISTEN (the session's last query stays the
	// LISTEN, which is how tests find it); both before the reader's read.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared(`+strconv.Itoa(listenersLock)+`, hashtext($1))`, db.schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.schema}.Sanitize()); err != nil {
		return err
	}
	db.listenGen.Store(gen)
	connected()
	db.kick()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == db.id {
			// This DB's own, sent after writes that were handed off to
			// its reader or woke it already (wrote): no read to do.
			continue
		}
		if db.trace != nil {
			db.trace.Wake(false, time.Now())
		}
		db.kick()
	}
}
