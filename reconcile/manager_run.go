package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/converge-go/converge/leader"
)

// Run runs everything added: the informers and every-replica functions at
// once; the controllers and leader-only functions at once without leader
// election, or, with it, for each term this replica wins, with a context
// that carries the term and is cancelled (with cause ErrLeadershipLost) the
// moment the lease is lost. It also serves HTTP if ManagerOptions.Addr is
// set.
//
// Once ctx is done, controllers stop taking keys and give the reconciles in
// progress their shutdown grace, and leader-only functions are cancelled;
// under leader election the lease is renewed meanwhile, and given up (or
// released, with Leader.ReleaseOnCancel) only after all of them have
// returned, so that the next leader never acts while this one still does.
// A lease lost during the grace cancels the reconciles in progress at once.
//
// Run returns nil once ctx is done and everything has returned (at most
// ShutdownTimeout later, or it returns an error naming what is still
// running). It returns early with an error when anything it runs fails, and,
// unless ManagerOptions.Standby, when leadership is lost: the error then wraps
// ErrLeadershipLost, and the process should exit. A failure and a shutdown
// that timed out are both returned (errors.Join). Run may be called once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("reconcile: Manager.Run called twice")
	}
	m.started = true
	m.mu.Unlock()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A failure is told apart from the caller's cancellation by its cause's
	// type and owner, never by comparing the caller's cause, which may be
	// of any type, even an uncomparable one.
	fail := func(err error) { cancel(&runFailure{m: m, err: err}) }
	g := &taskGroup{ctx: runCtx, fail: fail}
	// Informers stop after everything else has, so that controllers never
	// run against a stopped cache, and they carry runCtx's values.
	infCtx, stopInformers := context.WithCancel(context.WithoutCancel(runCtx))
	defer stopInformers()
	informers := &taskGroup{ctx: infCtx, fail: fail}

	stopHTTP, err := m.serveHTTP()
	if err != nil {
		return err
	}
	for _, c := range m.caches {
		informers.start(task{kind: "informer", name: c.Name(), run: c.Run})
	}
	if s := m.opts.Shards; s != nil {
		g.start(task{kind: "sharder", name: s.Identity(), run: s.Run})
	}
	for _, t := range m.always {
		g.start(t)
	}
	if m.elector == nil {
		for _, t := range m.leading {
			g.start(t)
		}
	} else {
		// The elector runs on a context of its own, cancelled only once no
		// term's tasks run: its leader context (lctx) then means "this
		// replica holds the lease" throughout, shutdown grace included.
		electCtx, stopElector := context.WithCancel(context.WithoutCancel(runCtx))
		defer stopElector()
		m.lead = func(lctx context.Context) { m.leadTerm(runCtx, fail, lctx) }
		g.start(task{kind: "elector", name: m.opts.Lock.Describe(), run: func(context.Context) error { return m.elector.Run(electCtx) }})
		stop := context.AfterFunc(runCtx, func() {
			m.closeTerms()
			stopElector()
		})
		defer stop()
	}
	<-runCtx.Done()
	m.opts.Logger.Info("manager stopping", "cause", context.Cause(runCtx))
	deadline := time.Now().Add(m.opts.ShutdownTimeout)
	var timedOut error
	if running := g.wait(m.opts.ShutdownTimeout); running != nil {
		timedOut = m.shutdownTimedOut(append(m.termRunning(), running...))
	}
	stopInformers()
	if timedOut == nil {
		if running := informers.wait(time.Until(deadline)); running != nil {
			timedOut = m.shutdownTimedOut(running)
		}
	}
	stopHTTP()
	return joinErrs(m.failure(runCtx), timedOut)
}

// runFailure is the cause of Run's context when something Run runs failed.
type runFailure struct {
	m   *Manager
	err error
}

func (f *runFailure) Error() string { return f.err.Error() }
func (f *runFailure) Unwrap() error { return f.err }

// failure returns the error that ended Run, if one of its own tasks did
// (not the caller, nor another Manager running this one).
func (m *Manager) failure(runCtx context.Context) error {
	if f, ok := context.Cause(runCtx).(*runFailure); ok && f.m == m {
		return f.err
	}
	return nil
}

func (m *Manager) shutdownTimedOut(running []string) error {
	return fmt.Errorf("reconcile: manager shutdown timed out after %v; still running: %s", m.opts.ShutdownTimeout, strings.Join(running, ", "))
}

// joinErrs returns the errors that are not nil: nil, one as it is, or
// several joined.
func joinErrs(errs ...error) error {
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...) // nil for none
}

// leadTerm runs one term's leader-only tasks, unless Run is stopping, and
// returns when they have.
func (m *Manager) leadTerm(runCtx context.Context, fail func(error), lctx context.Context) {
	m.mu.Lock()
	if m.termsClosed || runCtx.Err() != nil {
		// Won while stopping: act on nothing; the elector gives the lease
		// up once Run cancels it.
		m.mu.Unlock()
		return
	}
	m.terms.Add(1)
	m.mu.Unlock()
	defer m.terms.Done()
	m.runTerm(runCtx, fail, lctx)
}

// closeTerms stops terms from starting tasks and waits until no term's
// tasks run.
func (m *Manager) closeTerms() {
	m.mu.Lock()
	m.termsClosed = true
	m.mu.Unlock()
	m.terms.Wait()
}

// termRunning names the latest term's tasks still running.
func (m *Manager) termRunning() []string {
	m.mu.Lock()
	g := m.term
	m.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.runningNow()
}

// runTerm runs the leader-only tasks for one term, whose context is lctx
// (live while this replica holds the lease), and returns when they have
// returned.
//
// The tasks get lctx's values (the term) but their own cancellation: a
// lost lease cancels them with ErrLeadershipLost, on which controllers
// cancel their reconciles at once; Run's end cancels them with its cause,
// on which controllers give a grace. lctx also goes along (withLease), so
// that a controller in its grace learns when the lease is lost.
func (m *Manager) runTerm(runCtx context.Context, fail func(error), lctx context.Context) {
	term, _ := leader.TermFromContext(lctx)
	m.opts.Logger.Info("leading", "term", term)
	tctx, cancel := context.WithCancelCause(withLease(context.WithoutCancel(lctx), lctx))
	defer cancel(nil)
	stopLost := context.AfterFunc(lctx, func() { cancel(ErrLeadershipLost) })
	defer stopLost()
	stopShutdown := context.AfterFunc(runCtx, func() { cancel(context.Cause(runCtx)) })
	defer stopShutdown()
	g := &taskGroup{ctx: tctx, fail: fail}
	m.mu.Lock()
	m.term = g
	m.mu.Unlock()
	for _, t := range m.leading {
		g.start(t)
	}
	g.waitAll()
	// Tasks that all returned on their own leave the term held, idle,
	// until it ends.
	select {
	case <-lctx.Done():
	case <-runCtx.Done():
	}
	if runCtx.Err() == nil {
		if m.opts.Standby {
			m.opts.Logger.Warn("leadership lost; standing by", "term", term)
		} else {
			fail(fmt.Errorf("term %d: %w", term, ErrLeadershipLost))
		}
	}
}

// leaseKey is the context key of the lease context (see withLease).
type leaseKey struct{}

// withLease returns ctx carrying lease, a context that is done when this
// replica no longer holds the leader's lease.
func withLease(ctx, lease context.Context) context.Context {
	return context.WithValue(ctx, leaseKey{}, lease)
}

// leaseFrom returns the lease context a Manager put in ctx, or nil: a
// controller's grace ends early when it is done.
func leaseFrom(ctx context.Context) context.Context {
	lease, _ := ctx.Value(leaseKey{}).(context.Context)
	return lease
}

// taskGroup runs tasks and knows which are still running.
type taskGroup struct {
	ctx  context.Context
	fail func(error)

	wg      sync.WaitGroup
	mu      sync.Mutex
	running []string // guarded by mu
}

func (g *taskGroup) start(t task) {
	label := fmt.Sprintf("%s %q", t.kind, t.name)
	g.mu.Lock()
	g.running = append(g.running, label)
	g.mu.Unlock()
	g.wg.Go(func() {
		defer func() {
			g.mu.Lock()
			if i := slices.Index(g.running, label); i >= 0 {
				g.running = slices.Delete(g.running, i, i+1)
			}
			g.mu.Unlock()
		}()
		if err := t.run(g.ctx); err != nil && g.ctx.Err() == nil {
			// An informer's errors name it already ("informer %q: …"):
			// say it once.
			if !strings.HasPrefix(err.Error(), label+": ") {
				err = fmt.Errorf("%s: %w", label, err)
			}
			g.fail(err)
		}
	})
}

func (g *taskGroup) waitAll() { g.wg.Wait() }

func (g *taskGroup) runningNow() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.running)
}

// wait waits for every task, at most timeout of real time, and returns nil
// or, on a timeout, the tasks still running.
func (g *taskGroup) wait(timeout time.Duration) []string {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return g.runningNow()
	}
}

// serveHTTP starts the health, readiness and metrics server, if Addr is
// set, and returns how to stop it.
func (m *Manager) serveHTTP() (stop func(), err error) {
	if m.opts.Addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", m.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("reconcile: manager HTTP: %w", err)
	}
	m.mu.Lock()
	m.addr = ln.Addr().String()
	m.mu.Unlock()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", m.serveChecks(m.healthChecks))
	mux.HandleFunc("/readyz", m.serveChecks(m.readyChecks))
	if m.opts.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(m.opts.Gatherer, promhttp.HandlerOpts{}))
	}
	if m.opts.Debug.Enabled {
		mux.Handle(debugRoot, m.DebugHandler())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.opts.Logger.Error("manager HTTP server failed", "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// healthChecks fail only for a wedged leader or bucket holder: restarting the process is
// what fixes that.
func (m *Manager) healthChecks(context.Context) (failed, notes []string) {
	if m.elector != nil {
		if err := m.elector.Check(); err != nil {
			failed = append(failed, "leader: "+err.Error())
		}
	}
	if m.opts.Shards != nil {
		if err := m.opts.Shards.Check(); err != nil {
			failed = append(failed, "shards: "+err.Error())
		}
	}
	return failed, nil
}

// readyChecks also fail while an informer has not synced, or is stuck
// (ManagerOptions.StuckAfter). Bad keys are noted, not failed: the rest
// of the collection flows, and a restart would not fix the value.
func (m *Manager) readyChecks(ctx context.Context) (failed, notes []string) {
	failed, _ = m.healthChecks(ctx)
	for _, v := range m.informerViews(ctx) {
		switch {
		case !v.Synced:
			failed = append(failed, fmt.Sprintf("informer %q: not synced", v.Name))
		case v.Stuck:
			failed = append(failed, fmt.Sprintf("informer %q: stuck: its revision %d has stood still for %v behind the store's head %d",
				v.Name, v.LastRevision, v.StalledFor, v.Head))
		}
		if n := v.Stats.BadKeys; n > 0 {
			notes = append(notes, fmt.Sprintf("informer %q: %d bad keys (values that could not be decoded; see the debug pages)", v.Name, n))
		}
	}
	return failed, notes
}

// serveChecks answers 503 with the failed checks, one a line, or 200 "ok";
// notes follow either, one a line.
func (m *Manager) serveChecks(checks func(context.Context) (failed, notes []string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		failed, notes := checks(r.Context())
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(append(failed, notes...), "\n"))
			return
		}
		fmt.Fprintln(w, strings.Join(append([]string{"ok"}, notes...), "\n"))
	}
}
