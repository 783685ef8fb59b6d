package simtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/reconcile"
)

// ErrCrashed is returned by every write of a process the kit has crashed:
// the write at the crash point (it committed; the process died before it
// could use the answer) and any later one (it wrote nothing: a dead process
// cannot write).
var ErrCrashed = errors.New("simtest: process crashed")

// Runnable is what Process.Add runs: a *reconcile.Controller[K], of any key
// type, or anything else that runs until its context is done.
type Runnable interface {
	Name() string
	Run(ctx context.Context) error
}

// Process is one incarnation of the controller binary under test: what
// Spec.Process builds runs on its context, and a crash cancels that context,
// waits for everything to return and throws it all away (informers, queues,
// reconciler values), as the death of a real process would. The stores
// survive: they are the world's.
type Process struct {
	run         *runState
	incarnation int
	// lag is how many revisions behind each store this process's
	// informers list until staleUntil, after a stale restart; 0 if not.
	lag        int
	staleUntil time.Time
	ctx        context.Context
	cancel     context.CancelCauseFunc
	wg         sync.WaitGroup

	// writing serialises the process's writes, so that the dead check and
	// the write are one step: no write slips past a crash. A channel, not a
	// sync.Mutex: a goroutine that waits for it (while another's Effect
	// takes virtual time, or the holder is frozen by a Depose fault) is
	// durably blocked, so synctest.Wait returns and virtual time moves on.
	writing chan struct{}
	dead    atomic.Bool
	// deposed is set once a Depose fault has frozen the process: a
	// successor runs beside it, and it only ends.
	deposed atomic.Bool

	errMu sync.Mutex
	errs  []error // Run errors of goroutines that failed while alive

	// thaw is non-nil while the process is frozen (a Depose fault), and
	// closed when it thaws; see Clock.
	freezeMu sync.Mutex
	thaw     chan struct{}
}

func newProcess(run *runState, incarnation, lag int, staleFor time.Duration) *Process {
	// The cause is ErrLeadershipLost so that a controller skips its
	// shutdown grace: a dead process gets no grace.
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Process{run: run, incarnation: incarnation, lag: lag, staleUntil: time.Now().Add(staleFor), ctx: ctx, cancel: cancel,
		writing: make(chan struct{}, 1)}
}

// lock and unlock bracket one write of the process.
func (p *Process) lock()   { p.writing <- struct{}{} }
func (p *Process) unlock() { <-p.writing }

// Context is cancelled when the process crashes or the run ends.
func (p *Process) Context() context.Context { return p.ctx }

// Incarnation numbers the process's lives in one run: 0, then one more
// after each crash. Use it in generated names, so that names stay unique
// across restarts and the same in every rerun (no crypto/rand).
func (p *Process) Incarnation() int { return p.incarnation }

// Logger discards: a run's controllers log nothing unless the test asks
// (the report says what happened).
func (p *Process) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Add runs r until the process ends. Build controllers with
// reconcile.WithWorkers(1): one worker keeps the order of writes, and so
// the numbering of crash points, the same from run to run.
func (p *Process) Add(r Runnable) { p.Go(r.Name(), r.Run) }

// Go runs f on the process's context until the process ends. An error it
// returns while the process is alive fails the run, except one that wraps
// reconcile.ErrLeadershipLost: that is how a reconcile.Manager with a Lock
// ends when its lease is lost, and a program is to exit on it. The process
// then exits: a deposed one (a Depose fault) ends, as it was meant to; any
// other is started afresh, as after a crash, as a supervisor would.
func (p *Process) Go(name string, f func(ctx context.Context) error) {
	p.wg.Go(func() {
		err := f(p.ctx)
		switch {
		case err == nil || p.ctx.Err() != nil:
		case errors.Is(err, reconcile.ErrLeadershipLost):
			p.exit()
		default:
			p.errMu.Lock()
			p.errs = append(p.errs, fmt.Errorf("%s: %w", name, err))
			p.errMu.Unlock()
		}
	})
}

// exit ends a process that left on its own. The driver starts the next
// one unless this one was deposed: its successor runs already.
func (p *Process) exit() {
	p.dead.Store(true)
	p.cancel(reconcile.ErrLeadershipLost)
	if p.deposed.Load() {
		return
	}
	select {
	case p.run.crashed <- crash{p: p}:
	default:
	}
}

// crash kills the process: no write of it succeeds any more, and
// everything it runs is told to stop. It does not wait (it runs on a
// reconcile's goroutine, which the stop waits for); the driver does, and
// starts the next process lag revisions behind (0: up to date). The
// write lock must be held.
func (p *Process) crash(lag int) {
	p.dead.Store(true)
	p.cancel(reconcile.ErrLeadershipLost)
	select {
	case p.run.crashed <- crash{p: p, lag: lag}:
	default:
	}
}

// crash is a process that crashed, and the lag of its successor; or, with
// release set, one that froze in a write (a Depose fault): its successor
// starts beside it, and closing release lets the write go.
type crash struct {
	p       *Process
	lag     int
	release chan struct{}
}

// kill ends a process that went past the run's budget: like crash, but
// the driver does not start another. The write lock must be held.
func (p *Process) kill() {
	p.dead.Store(true)
	p.cancel(reconcile.ErrLeadershipLost)
}

// stop ends the process and waits for everything it ran, and returns the
// errors of its goroutines that failed while it was alive. A write under
// way when it is called completes (it found the process alive); none
// starts after. It may be called again.
func (p *Process) stop() error {
	p.unfreeze()
	p.dead.Store(true)
	p.cancel(reconcile.ErrLeadershipLost)
	p.wg.Wait()
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return errors.Join(p.errs...)
}

// Count wraps rec so that the kit counts its reconciles per key (for the
// liveness oracle's hot-loop check), names the key of each write in a
// failure report, and starts each reconcile only when the run's gate lets
// it (one at a time, in an order that is the same in every rerun). Wrap
// every reconciler a Process builds with it.
func Count[K comparable](p *Process, controller string, rec reconcile.Reconciler[K]) reconcile.Reconciler[K] {
	return reconcile.Func(func(ctx context.Context, key K) (reconcile.Result, error) {
		who := fmt.Sprintf("%s/%v", controller, key)
		if err := p.run.gate.wait(ctx, fmt.Sprintf("1 reconcile %s %d", who, p.incarnation)); err != nil {
			return reconcile.Result{}, err
		}
		if p.run.reconciled(who) {
			p.lock()
			p.kill()
			p.unlock()
			return reconcile.Result{}, errBudget
		}
		p.run.begin()
		defer p.run.end()
		return rec.Reconcile(context.WithValue(ctx, reconcilingKey{}, who), key)
	})
}

// reconcilingKey carries "controller/key" in a reconcile's context, for
// the write log.
type reconcilingKey struct{}
