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
// moment the term ends. It also serves HTTP (see ManagerOptions.Addr).
//
// Run returns nil once ctx is done and everything has returned (at most
// ShutdownTimeout later, or it returns an error naming what is still
// running). It returns early with an error when anything it runs fails, and,
// unless ManagerOptions.Standby, when leadership is lost: the error then wraps
// ErrLeadershipLost, and the process should exit. Run may be called once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("reconcile: Manager.Run called twice")
	}
	m.started = true
	m.mu.Unlock()

	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
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
		informers.start(task{"informer", c.Name(), c.Run})
	}
	for _, t := range m.always {
		g.start(t)
	}
	if m.elector == nil {
		for _, t := range m.leading {
			g.start(t)
		}
	} else {
		m.lead = func(lctx context.Context) { m.runTerm(runCtx, fail, lctx) }
		g.start(task{"elector", m.opts.Lock.Describe(), m.elector.Run})
	}
	<-runCtx.Done()
	m.opts.Logger.Info("manager stopping", "cause", context.Cause(runCtx))
	deadline := time.Now().Add(m.opts.ShutdownTimeout)
	err = g.wait(m.opts.ShutdownTimeout)
	stopInformers()
	if err == nil {
		err = informers.wait(time.Until(deadline))
	}
	stopHTTP()
	if cause := context.Cause(runCtx); ctx.Err() == nil || cause != context.Cause(ctx) {
		return cause // a failure, not the caller's cancellation
	}
	return err
}

// runTerm runs the leader-only tasks for one term, whose context is lctx,
// and returns when they have returned.
func (m *Manager) runTerm(runCtx context.Context, fail context.CancelCauseFunc, lctx context.Context) {
	term, _ := leader.TermFromContext(lctx)
	m.opts.Logger.Info("leading", "term", term)
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(lctx))
	stop := context.AfterFunc(lctx, func() {
		if runCtx.Err() == nil {
			cancel(ErrLeadershipLost)
		} else {
			cancel(context.Cause(runCtx))
		}
	})
	defer stop()
	g := &taskGroup{ctx: tctx, fail: fail}
	for _, t := range m.leading {
		g.start(t)
	}
	g.waitAll()
	cancel(nil)
	if runCtx.Err() == nil {
		if m.opts.Standby {
			m.opts.Logger.Warn("leadership lost; standing by", "term", term)
		} else {
			fail(fmt.Errorf("term %d: %w", term, ErrLeadershipLost))
		}
	}
}

// taskGroup runs tasks and knows which are still running.
type taskGroup struct {
	ctx  context.Context
	fail context.CancelCauseFunc

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
			g.fail(fmt.Errorf("%s: %w", label, err))
		}
	})
}

func (g *taskGroup) waitAll() { g.wg.Wait() }

// wait waits for every task, at most timeout of real time.
func (g *taskGroup) wait(timeout time.Duration) error {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		g.mu.Lock()
		defer g.mu.Unlock()
		return fmt.Errorf("reconcile: manager shutdown timed out after %v; still running: %s", timeout, strings.Join(g.running, ", "))
	}
}

// serveHTTP starts the health, readiness and metrics server, unless it is
// off, and returns how to stop it.
func (m *Manager) serveHTTP() (stop func(), err error) {
	if m.opts.Addr == "off" {
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

// healthChecks fail only for a wedged leader: restarting the process is
// what fixes that.
func (m *Manager) healthChecks() []string {
	if m.elector != nil {
		if err := m.elector.Check(); err != nil {
			return []string{"leader: " + err.Error()}
		}
	}
	return nil
}

// readyChecks also fail until every informer has synced.
func (m *Manager) readyChecks() []string {
	failed := m.healthChecks()
	for _, c := range m.caches {
		if !c.HasSynced() {
			failed = append(failed, fmt.Sprintf("informer %q: not synced", c.Name()))
		}
	}
	return failed
}

func (m *Manager) serveChecks(checks func() []string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		failed := checks()
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(failed, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	}
}
