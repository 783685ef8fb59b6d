package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/converge-go/converge/events"
	osproc "github.com/converge-go/converge/examples/internal/proc"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// crashBackOff is kubelet's restart policy for a process that keeps
// exiting (CrashLoopBackOff): see proc.CrashBackOff.
type crashBackOff = osproc.CrashBackOff

// agent is the node agent controller: a kubelet for one node. For every
// Pod assigned to its node it keeps one OS process running, restarts it
// when it exits (at once the first time, then with crashBackOff), stops it
// when the pod is deleted, and writes the pod's status.
type agent struct {
	node    string
	podInf  *informer.Informer[string, Pod]
	pods    informer.Store[string, Pod]
	backoff crashBackOff
	grace   time.Duration // between SIGTERM and SIGKILL
	now     func() time.Time
	// events records BackOff on the pod's key; nil records nothing.
	events *events.Recorder

	// exits receives a pod's name when its process exits: the
	// controller's FromChannel source, so a death is noticed at once.
	exits     chan string
	quit      chan struct{} // closed by shutdown
	processes runner
	wg        sync.WaitGroup // the goroutines waiting for processes

	mu     sync.Mutex
	procs  map[string]*proc // by pod name; guarded by mu
	closed bool             // set by shutdown: start nothing more
	once   sync.Once
}

// proc is what the agent knows about one pod's process, across restarts.
type proc struct {
	cur       *process // the current process; nil while none runs
	starts    int
	crashes   int // consecutive, for the back-off
	lastExit  string
	delay     time.Duration
	nextStart time.Time
}

// process is one OS process. exit and exitAt are set before done is closed.
type process struct {
	pid       int
	startedAt time.Time
	done      chan struct{}
	exit      string
	exitAt    time.Time
}

func newAgent(node string, podInf *informer.Informer[string, Pod], pods informer.Store[string, Pod], b crashBackOff, r runner) *agent {
	return &agent{node: node, podInf: podInf, pods: pods, backoff: b, grace: 2 * time.Second, now: time.Now,
		exits: make(chan string, 64), quit: make(chan struct{}), processes: r, procs: make(map[string]*proc)}
}

// errInvalidCommand marks a command that cannot be started.
var errInvalidCommand = osproc.ErrInvalidCommand

// Reconcile makes pod name's process match the pod: running if the pod
// exists on this node, gone otherwise.
func (a *agent) Reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	if a.isClosed() {
		return reconcile.Result{}, nil // shutting down: its processes are being stopped
	}
	pod, ok := a.podInf.Get(name)
	if !ok || pod.Spec.Node != a.node {
		a.stop(name)
		return reconcile.Result{}, nil
	}
	a.mu.Lock()
	p := a.procs[name]
	if p == nil {
		p = &proc{}
		a.procs[name] = p
	}
	cur := p.cur
	a.mu.Unlock()

	if cur != nil {
		select {
		case <-cur.done:
			a.mu.Lock()
			p.cur = nil
			a.mu.Unlock()
			p.crashes, p.delay = a.backoff.AfterExit(p.crashes, cur.exitAt.Sub(cur.startedAt))
			p.lastExit, p.nextStart = cur.exit, cur.exitAt.Add(p.delay)
			reconcile.LoggerFrom(ctx).Info("process exited", "pid", cur.pid, "exit", cur.exit, "restartIn", p.delay)
		default:
			return reconcile.Result{}, a.report(ctx, name, p.running())
		}
	}
	if wait := p.nextStart.Sub(a.now()); wait > 0 {
		st := PodStatus{Phase: PhaseWaiting, Reason: ReasonCrashLoopBackOff, RestartCount: max(0, p.starts-1),
			Message:  fmt.Sprintf("back-off %v restarting failed process (%s)", p.delay, p.lastExit),
			LastExit: p.lastExit, BackOff: p.delay.String(), NextRestartAt: p.nextStart}
		a.events.Eventf(ctx, name, events.Warning, EventBackOff, "Back-off restarting failed process (%s)", p.lastExit)
		return reconcile.Result{RequeueAfter: wait}, a.report(ctx, name, st)
	}
	err := a.start(name, p, pod.Spec.Command)
	if errors.Is(err, errInvalidCommand) {
		st := PodStatus{Phase: PhaseFailed, Reason: ReasonInvalidCommand, Message: err.Error(), RestartCount: max(0, p.starts-1)}
		if werr := a.report(ctx, name, st); werr != nil {
			return reconcile.Result{}, werr // retried
		}
		// Terminal: retrying cannot fix the command, only a new pod can.
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	if err != nil || a.isClosed() {
		return reconcile.Result{}, err
	}
	reconcile.LoggerFrom(ctx).Info("process started", "pid", p.cur.pid, "restarts", p.starts-1)
	return reconcile.Result{}, a.report(ctx, name, p.running())
}

func (p *proc) running() PodStatus {
	return PodStatus{Phase: PhaseRunning, PID: p.cur.pid, StartedAt: p.cur.startedAt,
		RestartCount: p.starts - 1, LastExit: p.lastExit}
}

// report writes the pod's status, unless it is unchanged, the pod is gone
// or it is no longer this node's.
func (a *agent) report(ctx context.Context, name string, st PodStatus) error {
	_, _, err := informer.Update(ctx, a.pods, name, func(p *Pod) error {
		if p.Spec.Node == a.node && !sameJSON(p.Status, st) {
			p.Status = st
		}
		return nil
	})
	if errors.Is(err, informer.ErrNotFound) {
		return nil // deleted: nothing to report
	}
	return err
}

// start starts the pod's process, unless the agent is shutting down.
func (a *agent) start(name string, p *proc, command []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	pid, wait, err := a.processes.start(name, command)
	if err != nil {
		return err
	}
	cur := &process{pid: pid, startedAt: a.now(), done: make(chan struct{})}
	p.cur = cur
	p.starts++
	a.wg.Go(func() {
		exit := wait()
		cur.exit, cur.exitAt = exit, a.now()
		close(cur.done)
		select {
		case a.exits <- name:
		case <-a.quit:
		}
	})
	return nil
}

// stop stops pod name's process, if any, and forgets the pod.
func (a *agent) stop(name string) {
	a.mu.Lock()
	p := a.procs[name]
	delete(a.procs, name)
	a.mu.Unlock()
	if p != nil && p.cur != nil {
		terminate(a.processes, a.grace, p.cur)
	}
}

func (a *agent) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// shutdown stops every process and waits until they are gone. It may be
// called more than once; nothing is started after the first call.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	var running []*process
	for _, p := range a.procs {
		if p.cur != nil {
			running = append(running, p.cur)
		}
	}
	a.mu.Unlock()
	terminate(a.processes, a.grace, running...)
	a.once.Do(func() { close(a.quit) })
	a.wg.Wait()
	a.processes.close()
}

// run is the agent's part of the Manager: when the Manager stops, so do
// the processes.
func (a *agent) run(ctx context.Context) error {
	<-ctx.Done()
	a.shutdown()
	return nil
}

// terminate stops ps: SIGTERM, then SIGKILL after grace (osproc.Terminate).
func terminate(r runner, grace time.Duration, ps ...*process) {
	ex := make([]osproc.Exiting, len(ps))
	for i, p := range ps {
		ex[i] = osproc.Exiting{PID: p.pid, Done: p.done}
	}
	osproc.Terminate(r.signal, ex, grace)
}
