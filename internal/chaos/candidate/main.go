//go:build linux

// Command candidate is one replica for the leader election chaos tests and
// benchmarks (package internal/chaos, bench): it campaigns for a lock in etcd
// or PostgreSQL with a leader.Elector and, while it leads, appends entries
// to a log in the same backend, each write fenced by its term. It reports
// what it does as JSON lines on stdout, for the test that started it.
//
//	candidate -backend etcd -endpoints 127.0.0.1:2379 -lock /k -prefix /p -id a
//	candidate -backend postgres -dsn postgres://… -lock name -prefix tbl -id a
//
// # Work and fencing
//
// While leading it loops: read the clock (end), check Elector.IsLeader,
// append the entry (term, identity, start, end) where start is the previous
// entry's end (the first entry's start is when the term began), then sleep
// -every. IsLeader is checked at both ends of every interval, and a lease,
// once lapsed, stays lapsed for the term, so each interval lies within the
// lease the elector judged by its own clock; the test checks that intervals
// of different terms never overlap. IsLeader rather than the context:
// after a pause of the whole process (SIGSTOP, a frozen VM) the work can run
// before the watchdog that cancels the context does, while IsLeader reads
// the clock. When the term ends (the loop sees IsLeader false or the context
// done) it makes one more write, marked late, without checking: the write a
// reconciler has in flight when it is deposed. The fence must refuse it if
// a newer term has written.
//
// The append is fenced: in etcd one transaction
//
//	If(Value(PREFIX/fence) < term+1) Then(Put(PREFIX/fence, term), Put(PREFIX/log/…, entry))
//
// with terms as 20 zero-padded digits (etcd compares values as bytes); in PostgreSQL one transaction
//
//	UPDATE PREFIX_fence SET term = $1 WHERE id = 1 AND term <= $1  -- 0 rows: refused
//	INSERT INTO PREFIX_log (term, identity, start_ns, end_ns, late) VALUES (…)
//
// The test creates the fence (term 0) and the tables. The UPDATE holds the
// fence row's lock until commit, so the log's seq column is commit order;
// in etcd the keys' ModRevision is.
//
// Every write runs on a context of its own (timeout 2s), not the term's, so
// that losing leadership never cancels one already sent: the fence, not the
// cancellation, is what must stop it.
//
// # Output
//
// One JSON object per line, a candidates.Event (package
// internal/chaos/candidates defines the format, for the tests and benchmarks
// that read it): ready (the elector is about to run), leading (a term
// started), write (one append: ok true if it was accepted, refused true if
// the fence refused it; neither if it failed and its outcome is unknown),
// cancelled (the term's context was cancelled), stopped (the term's work
// returned) and exit (Run returned, after the release if -release). Times
// are CLOCK_MONOTONIC nanoseconds, which every process on the machine
// shares. SIGTERM or SIGINT cancels
// Run's context.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/leader"
	leaderetcd "github.com/converge-go/converge/leader/etcd"
	leaderpg "github.com/converge-go/converge/leader/postgres"
)

// errRefused reports a write the fence refused.
var errRefused = errors.New("refused by the fence")

// backend is a lock and a fenced append to the log.
type backend struct {
	lock   leader.Lock
	append func(ctx context.Context, e candidates.Entry) error // errRefused if fenced off
	close  func()
}

func main() {
	var (
		kind      = flag.String("backend", "", "etcd or postgres")
		endpoints = flag.String("endpoints", "", "etcd endpoints, comma-separated")
		dsn       = flag.String("dsn", "", "PostgreSQL connection string")
		lockName  = flag.String("lock", "", "etcd key or PostgreSQL lock name of the lock")
		prefix    = flag.String("prefix", "", "etcd key prefix or PostgreSQL table prefix of the fence and the log")
		id        = flag.String("id", "", "identity")
		lease     = flag.Duration("lease", leader.DefaultLeaseDuration, "LeaseDuration")
		renew     = flag.Duration("renew", leader.DefaultRenewDeadline, "RenewDeadline")
		retry     = flag.Duration("retry", leader.DefaultRetryPeriod, "RetryPeriod")
		release   = flag.Bool("release", true, "ReleaseOnCancel")
		every     = flag.Duration("every", 20*time.Millisecond, "time between two appends while leading")
	)
	flag.Parse()
	if err := run(*kind, *endpoints, *dsn, *lockName, *prefix, *id, *lease, *renew, *retry, *release, *every); err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		os.Exit(1)
	}
}

func run(kind, endpoints, dsn, lockName, prefix, id string, lease, renew, retry time.Duration, release bool, every time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := &emitter{enc: json.NewEncoder(os.Stdout), id: id}

	var (
		b   backend
		err error
	)
	switch kind {
	case "etcd":
		b, err = openEtcd(endpoints, lockName, prefix)
	case "postgres":
		b, err = openPostgres(ctx, dsn, lockName, prefix)
	default:
		err = fmt.Errorf("-backend %q: want etcd or postgres", kind)
	}
	if err != nil {
		return err
	}
	defer b.close()

	write := func(e candidates.Entry) {
		wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := b.append(wctx, e)
		ev := candidates.Event{Ev: "write", Term: e.Term, Late: e.Late, Start: e.Start, End: e.End, Done: candidates.Mono(), OK: err == nil, Refused: errors.Is(err, errRefused)}
		if err != nil && !ev.Refused {
			ev.Err = err.Error()
		}
		out.emit(ev)
	}

	var e *leader.Elector
	e, err = leader.New(b.lock, leader.Config{
		Identity:        id,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: release,
		OnStartedLeading: func(lctx context.Context) {
			term, _ := leader.TermFromContext(lctx)
			start := candidates.Mono()
			out.emit(candidates.Event{Ev: "leading", Term: term, Start: start})
			context.AfterFunc(lctx, func() { out.emit(candidates.Event{Ev: "cancelled", Term: term}) })
			for e.IsLeader() {
				end := candidates.Mono()
				if !e.IsLeader() {
					break
				}
				write(candidates.Entry{Term: term, Identity: id, Start: start, End: end})
				start = end
				t := time.NewTimer(every)
				select {
				case <-lctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
			now := candidates.Mono()
			write(candidates.Entry{Term: term, Identity: id, Start: now, End: now, Late: true})
			out.emit(candidates.Event{Ev: "stopped", Term: term})
		},
	})
	if err != nil {
		return err
	}
	out.emit(candidates.Event{Ev: "ready"})
	if err := e.Run(ctx); err != nil {
		return err
	}
	out.emit(candidates.Event{Ev: "exit"})
	return nil
}

// emitter writes events as JSON lines, one at a time.
type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
	id  string
}

func (o *emitter) emit(ev candidates.Event) {
	ev.ID, ev.T = o.id, candidates.Mono()
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(ev) // stdout closed: the test is gone; SIGPIPE ends us
}

func openEtcd(endpoints, key, prefix string) (backend, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return backend{}, err
	}
	fence := prefix + "/fence"
	return backend{
		lock: leaderetcd.NewLock(cli, key),
		append: func(ctx context.Context, e candidates.Entry) error {
			t := fmt.Sprintf("%020d", e.Term)
			val, err := json.Marshal(e)
			if err != nil {
				return err
			}
			logKey := fmt.Sprintf("%s/log/%s/%s/%d", prefix, t, e.Identity, e.End)
			// fence <= term, as fence < term+1: clientv3.Compare has no "<=".
			next := fmt.Sprintf("%020d", e.Term+1)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.Value(fence), "<", next)).
				Then(clientv3.OpPut(fence, t), clientv3.OpPut(logKey, string(val))).
				Commit()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return errRefused
			}
			return nil
		},
		close: func() { _ = cli.Close() },
	}, nil
}

func openPostgres(ctx context.Context, dsn, name, prefix string) (backend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return backend{}, err
	}
	cfg.MaxConns = 4
	// A leader paused (SIGSTOP) inside its fenced transaction would hold
	// the fence row's lock, and so every newer leader's writes, until it
	// resumes: end such a session after a second instead.
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "1000"
	// The lock needs an acknowledged write to survive a crash of the
	// server: a lost acquisition can hand one term to two electors. The
	// test server runs with synchronous_commit=off, for speed.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return backend{}, err
	}
	fence := pgx.Identifier{prefix + "_fence"}.Sanitize()
	logTable := pgx.Identifier{prefix + "_log"}.Sanitize()
	return backend{
		lock: leaderpg.NewLock(pool, name),
		append: func(ctx context.Context, e candidates.Entry) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, `UPDATE `+fence+` SET term = $1 WHERE id = 1 AND term <= $1`, int64(e.Term))
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 0 {
					return errRefused // BeginFunc rolls back
				}
				_, err = tx.Exec(ctx, `INSERT INTO `+logTable+` (term, identity, start_ns, end_ns, late) VALUES ($1, $2, $3, $4, $5)`,
					int64(e.Term), e.Identity, e.Start, e.End, e.Late)
				return err
			})
		},
		close: pool.Close,
	}, nil
}
