//go:build linux

// Command candidate is one replica for the leader election chaos tests and
// benchmarks (package internal/chaos, bench): it runs a reconcile.Manager
// with leader election over a lock in etcd or PostgreSQL and, while it
// leads, appends entries to a log in the same backend, each write fenced by
// its term, and, with -hold, reconciles. It reports what it does as JSON
// lines on stdout, for the test that started it.
//
//	candidate -backend etcd -endpoints 127.0.0.1:2379 -lock /k -prefix /p -id a
//	candidate -backend postgres -dsn postgres://… -lock name -prefix tbl -id a
//
// The Manager stands by after losing leadership (it campaigns again, as an
// Elector's Run does), releases the lock on shutdown if -release, and
// serves no HTTP.
//
// # Work and fencing
//
// A leader-only function loops while the term lasts: read the clock (end),
// check Manager.IsLeader, append the entry (term, identity, start, end)
// where start is the previous entry's end (the first entry's start is when
// the term began), then sleep -every. IsLeader is checked at both ends of
// every interval, and a lease, once lapsed, stays lapsed for the term, so
// each interval lies within the lease the elector judged by its own clock;
// the test checks that intervals of different terms never overlap. IsLeader
// rather than the context: after a pause of the whole process (SIGSTOP, a
// frozen VM) the work can run before the watchdog that cancels the context
// does, while IsLeader reads the clock. When the term ends or the Manager
// stops (the loop sees IsLeader false or its context done) it makes one
// more write, marked late, without checking: the write a reconciler has in
// flight when it is deposed. The fence must refuse it if a newer term has
// written.
//
// With -hold D, a controller also reconciles one key over and over while
// the term lasts, each reconcile taking D (unless its context is cancelled)
// and reported when it starts and ends; one that starts while IsLeader is
// false (after a pause, before the watchdog ends the term) is marked late.
// On SIGTERM the Manager lets the reconcile in progress finish within its
// shutdown grace (30s) while it keeps renewing the lease: the test checks
// that nothing of the next term begins before it has ended.
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
// that read it): ready (the Manager is about to run), leading (a term
// started), write (one append: ok true if it was accepted, refused true if
// the fence refused it; neither if it failed and its outcome is unknown),
// cancelled (the term's work was told to stop), stopped (the writing
// function returned), reconciling and reconciled (a reconcile started and
// ended), and exit (the Manager's Run returned, after the release if
// -release). Times are CLOCK_MONOTONIC nanoseconds, which every process on
// the machine shares. SIGTERM or SIGINT cancels Run's context.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/chaos/candidates"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/pglock"
	"github.com/converge-go/converge/reconcile"
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
		hold      = flag.Duration("hold", 0, "how long each reconcile takes; 0: no controller")
	)
	flag.Parse()
	cfg := leader.Config{Identity: *id, LeaseDuration: *lease, RenewDeadline: *renew, RetryPeriod: *retry, ReleaseOnCancel: *release}
	if err := run(*kind, *endpoints, *dsn, *lockName, *prefix, cfg, *every, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		os.Exit(1)
	}
}

func run(kind, endpoints, dsn, lockName, prefix string, cfg leader.Config, every, hold time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	id := cfg.Identity
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

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Lock: b.lock, Leader: cfg, Standby: true, Logger: logger})
	if err != nil {
		return err
	}
	w := &writer{b: b, m: m, out: out, id: id, every: every}
	if err := m.AddLeaderFunc("writer", w.run); err != nil {
		return err
	}
	if hold > 0 {
		if err := addReconciler(m, out, hold, logger); err != nil {
			return err
		}
	}
	out.emit(candidates.Event{Ev: "ready"})
	if err := m.Run(ctx); err != nil {
		return err
	}
	out.emit(candidates.Event{Ev: "exit"})
	return nil
}

// writer appends fenced entries while its term lasts (see the package doc).
type writer struct {
	b     backend
	m     *reconcile.Manager
	out   *emitter
	id    string
	every time.Duration
}

func (w *writer) run(ctx context.Context) error {
	term, _ := leader.TermFromContext(ctx)
	start := candidates.Mono()
	w.out.emit(candidates.Event{Ev: "leading", Term: term, Start: start})
	context.AfterFunc(ctx, func() { w.out.emit(candidates.Event{Ev: "cancelled", Term: term}) })
	// The lease outlives ctx while the Manager stops (it keeps it until the
	// controllers' grace is over): stop writing at either.
	for ctx.Err() == nil && w.m.IsLeader() {
		end := candidates.Mono()
		if !w.m.IsLeader() {
			break
		}
		w.write(candidates.Entry{Term: term, Identity: w.id, Start: start, End: end})
		start = end
		t := time.NewTimer(w.every)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	now := candidates.Mono()
	w.write(candidates.Entry{Term: term, Identity: w.id, Start: now, End: now, Late: true})
	w.out.emit(candidates.Event{Ev: "stopped", Term: term})
	return nil
}

// write appends e on a context of its own (timeout 2s), not the term's, so
// that losing leadership never cancels a write already sent: the fence,
// not the cancellation, is what must stop it.
func (w *writer) write(e candidates.Entry) {
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := w.b.append(wctx, e)
	ev := candidates.Event{Ev: "write", Term: e.Term, Late: e.Late, Start: e.Start, End: e.End, Done: candidates.Mono(), OK: err == nil, Refused: errors.Is(err, errRefused)}
	if err != nil && !ev.Refused {
		ev.Err = err.Error()
	}
	w.out.emit(ev)
}

// addReconciler adds a controller that reconciles one key again and again,
// each reconcile taking hold unless its context is cancelled first.
func addReconciler(m *reconcile.Manager, out *emitter, hold time.Duration, logger *slog.Logger) error {
	store, err := memstore.New[string, int]()
	if err != nil {
		return err
	}
	store.Put("k", 1)
	inf, err := informer.New("work", store)
	if err != nil {
		return err
	}
	rec := reconcile.Func(func(ctx context.Context, _ string) (reconcile.Result, error) {
		term, _ := leader.TermFromContext(ctx)
		start := candidates.Mono()
		// Late: begun when the lease had lapsed by this replica's clock,
		// as after a pause of the whole process, before the watchdog has
		// cancelled the term.
		late := !m.IsLeader()
		out.emit(candidates.Event{Ev: "reconciling", Term: term, Start: start, Late: late})
		t := time.NewTimer(hold)
		defer t.Stop()
		ev := candidates.Event{Ev: "reconciled", Term: term, Start: start, Late: late}
		select {
		case <-t.C:
		case <-ctx.Done():
			ev.Err = context.Cause(ctx).Error()
		}
		ev.End = candidates.Mono()
		out.emit(ev)
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	})
	c, err := reconcile.New("work", rec, reconcile.For(inf), reconcile.WithLogger(logger))
	if err != nil {
		return err
	}
	return m.AddController(c)
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
		lock: etcdlock.NewLock(cli, key),
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
		lock: pglock.NewLock(pool, name),
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
