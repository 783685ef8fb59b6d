package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/pglock"
)

// ErrFenced is the error (wrapped) of a write refused by a Fence: the lease
// row no longer holds the fence's term, so a newer leader has been elected
// (or the row is gone). Nothing was written. It is not a conflict to retry:
// the writer's term is over; it should stop and leave the work to the
// leader of the newer term.
var ErrFenced = errors.New("pgstore: fenced: the leader's term is over")

// fenced is what the fenced write statement returns when the term is not
// the lease row's (write() itself returns -1 for a conflict, 0 or above
// otherwise).
const fenced = -2

// Fence makes writes conditional on a leader's term in a leader/pglock
// lease row of the same database, checked in the transaction of the write
// itself. The check reads the lease row FOR SHARE, which holds off a
// takeover's UPDATE of that row until the write's transaction ends: so a
// write under term n either commits before term n+1 is granted or is
// refused with ErrFenced, whatever the clocks, pauses or network delays of
// the deposed leader. (The elector's cancellation of a deposed leader's
// context comes later, and cannot stop a write already sent.)
//
// Use it through Store.Fenced (typed writes, one statement each) or Do
// (any SQL, e.g. plain writes of a followed table).
type Fence struct {
	// Table is the lease table, as given to pglock.WithTable (may be
	// schema-qualified); "" is pglock.DefaultTable.
	Table string
	// Name is the lock's name, as given to pglock.NewLock.
	Name string
	// Term is the term the writes are made under: the elector's
	// leader.TermFromContext of the leader's context.
	Term leader.Term
	// IdleTimeout bounds how long Do's transaction may sit idle between
	// statements, holding the lease row locked, before the server ends the
	// session (idle_in_transaction_session_timeout, set for that
	// transaction only). Without it a writer paused inside Do (SIGSTOP, a
	// frozen VM, a stuck fn) would hold off every takeover of the lease for
	// as long as the pause: the next leader could not even be elected. Its
	// write is lost, as it would have been fenced anyway. Default (0):
	// DefaultFenceIdleTimeout; negative: no bound. Store.Fenced's writes are
	// single statements and never idle.
	IdleTimeout time.Duration
}

// DefaultFenceIdleTimeout is Fence.IdleTimeout's default: well under the
// leader package's default lease (15s), so a paused writer delays a takeover
// by at most this much.
const DefaultFenceIdleTimeout = 5 * time.Second

// String describes f for errors.
func (f Fence) String() string {
	return fmt.Sprintf("term %d of lock %s/%s", f.Term, f.table(), f.Name)
}

func (f Fence) table() string {
	if f.Table == "" {
		return pglock.DefaultTable
	}
	return f.Table
}

// check is the statement that locks the lease row and returns its term.
func (f Fence) check() string {
	return `SELECT term FROM ` + pgx.Identifier(strings.Split(f.table(), ".")).Sanitize() + ` WHERE name = $1 FOR SHARE`
}

// Do runs fn in one transaction on pool that first locks the lease row FOR
// SHARE and checks that it still holds f.Term. If it does not (or the row
// is missing), Do writes nothing and returns an error wrapping ErrFenced;
// otherwise it commits fn's writes, unless fn fails (then it rolls back and
// returns fn's error). The lease row stays locked until the transaction
// ends, so keep fn short: a takeover's UPDATE waits for it, and so does
// the current leader's renewal, which must finish within its renew deadline.
// If the transaction sits idle for f.IdleTimeout (the process paused, or fn
// waiting on something else), the server ends it and Do fails.
//
// Writes of a followed table (Follow) made in fn reach its informers as any
// other. Do needs a transaction of its own: through PgBouncer use session
// or transaction pooling, not statement pooling.
func (f Fence) Do(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	if f.Term > math.MaxInt64 {
		return fmt.Errorf("pgstore: %s: the term does not fit a bigint", f)
	}
	idle := f.IdleTimeout
	if idle == 0 {
		idle = DefaultFenceIdleTimeout
	}
	// set_config(..., true) lasts for this transaction only, and rides on
	// the check's round trip; no bound leaves the session's setting as it is.
	check, args := f.check(), []any{f.Name}
	if idle > 0 {
		check = strings.Replace(check, "SELECT term", "SELECT term, set_config('idle_in_transaction_session_timeout', $2, true)", 1)
		args = append(args, strconv.FormatInt(max(idle.Milliseconds(), 1), 10))
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var term *int64
		dst := []any{&term}
		if idle > 0 {
			dst = append(dst, new(string))
		}
		err := tx.QueryRow(ctx, check, args...).Scan(dst...)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgstore: %s: read the lease: %w", f, err)
		}
		if term == nil || *term != int64(f.Term) {
			return fmt.Errorf("pgstore: %s: %w", f, ErrFenced)
		}
		return fn(tx)
	})
}

// fenceQuery is a Fenced Store's write statement and its extra arguments.
type fenceQuery struct {
	write string
	name  string
	term  int64
	desc  string
}

func (q *fenceQuery) String() string { return q.desc }

// Fenced returns a Store of the same collection (sharing s's DB and codec)
// whose Create, Update and Delete are made under f: each is still one
// statement (so it works through any pooler), and its implicit
// transaction first locks the lease row FOR SHARE and writes only if the
// row holds f.Term; otherwise it writes nothing and returns an error
// wrapping ErrFenced. Get, List and Watch are s's. A term above
// math.MaxInt64 never matches.
//
// A leader makes its Store once per term, from its context:
//
//	term, _ := leader.TermFromContext(ctx)
//	w := store.Fenced(pgstore.Fence{Name: "my-controller", Term: term})
func (s *Store[V]) Fenced(f Fence) *Store[V] {
	c := *s
	term := int64(-1) // no lease holds it: every write is fenced
	if f.Term <= math.MaxInt64 {
		term = int64(f.Term)
	}
	// CASE evaluates write() only if the term matches; the scalar
	// sub-SELECT's FOR SHARE lock lasts until the statement's transaction
	// ends, after the write.
	c.fence = &fenceQuery{
		write: `SELECT CASE WHEN (` + strings.Replace(f.check(), "$1", "$6", 1) + `) = $7
	THEN ` + strings.TrimPrefix(s.q.write, "SELECT ") + ` ELSE ` + fmt.Sprint(fenced) + ` END`,
		name: f.Name,
		term: term,
		desc: f.String(),
	}
	return &c
}
