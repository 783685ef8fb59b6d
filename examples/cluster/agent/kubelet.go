package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	osproc "github.com/converge-go/converge/examples/internal/proc"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// kubelet reconciles the pods of its node: for each, one process per
// container, kept as the pod's restartPolicy says, and the pod's status.
type kubelet struct {
	cfg     Config
	pods    *informer.Informer[string, api.Pod]
	rec     *events.Recorder
	runner  runner
	backoff osproc.CrashBackOff
	// wake receives a pod's key when one of its processes exits or its
	// readiness changes: the controller's FromChannel source.
	wake chan string
	quit chan struct{} // closed by shutdown
	wg   sync.WaitGroup

	mu     sync.Mutex
	state  map[string]*podState // by pod key; guarded by mu
	closed bool
	once   sync.Once
}

// podState is what the agent knows of one pod's containers, across
// restarts. Only the pod's reconcile (one at a time per key) changes it.
type podState struct {
	uid        string
	startTime  time.Time
	containers map[string]*ctrState
}

type ctrState struct {
	cur       *process // the current process, nil while none runs
	starts    int32
	crashes   int
	lastTerm  *api.ContainerStateTerminated
	delay     time.Duration
	nextStart time.Time
	finished  bool // exited and not to be restarted
	ready     readiness
}

// process is one OS process; exit and exitAt are set before done closes.
type process struct {
	pid       int
	startedAt time.Time
	done      chan struct{}
	exit      osproc.Exit
	exitAt    time.Time
	stopProbe context.CancelFunc
}

func newKubelet(cfg Config, pods *informer.Informer[string, api.Pod], rec *events.Recorder) *kubelet {
	var r runner = newFakeRunner()
	if !cfg.FakeContainers {
		r = osRunner{osproc.NewRunner(SelfCommand, PodEnv)}
	}
	return &kubelet{cfg: cfg, pods: pods, rec: rec, runner: r,
		backoff: osproc.CrashBackOff{Base: cfg.Timings.CrashBackOff, Cap: cfg.Timings.CrashBackOffMax},
		wake:    make(chan string, 256), quit: make(chan struct{}), state: map[string]*podState{}}
}

// Reconcile makes pod key's processes match the pod and writes its status.
func (k *kubelet) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	pod, ok := k.pods.Get(key)
	if !ok || pod.Spec.NodeName != k.cfg.Node || pod.Deleting() {
		for _, c := range k.stopPod(key, gracePeriod(&pod, ok)) {
			k.rec.Eventf(ctx, key, events.Normal, "Killing", "Stopping container %s", c)
		}
		return reconcile.Result{}, nil
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return reconcile.Result{}, nil
	}
	ps := k.state[key]
	if ps != nil && ps.uid != pod.UID {
		k.mu.Unlock()
		k.stopPod(key, 0) // a new pod of the same name: the old one's processes go
		k.mu.Lock()
		ps = nil
	}
	if ps == nil {
		ps = &podState{uid: pod.UID, startTime: k.cfg.Clock.Now().UTC(), containers: map[string]*ctrState{}}
		k.state[key] = ps
	}
	k.mu.Unlock()

	var requeue time.Duration
	for _, c := range pod.Spec.Containers {
		k.mu.Lock()
		cs := ps.containers[c.Name]
		if cs == nil {
			cs = &ctrState{}
			ps.containers[c.Name] = cs
		}
		k.mu.Unlock()
		if wait := k.syncContainer(ctx, &pod, c, cs); wait > 0 && (requeue == 0 || wait < requeue) {
			requeue = wait
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, k.report(ctx, key, &pod, ps)
}

// syncContainer handles an exit, a restart and a back-off of one
// container, and returns how long until it must look again (0: when woken).
func (k *kubelet) syncContainer(ctx context.Context, pod *api.Pod, c api.Container, cs *ctrState) time.Duration {
	if cs.cur != nil {
		select {
		case <-cs.cur.done:
			k.exited(ctx, pod, c, cs)
		default:
			return 0 // running
		}
	}
	if cs.finished {
		return 0
	}
	now := k.cfg.Clock.Now()
	if wait := cs.nextStart.Sub(now); wait > 0 {
		k.rec.Eventf(ctx, pod.Key(), events.Warning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Name, podRef(pod))
		return wait
	}
	if err := k.start(pod, c, cs); err != nil {
		// As a runtime's start error: a terminated container with exit
		// code 128, restarted with the back-off.
		k.rec.Eventf(ctx, pod.Key(), events.Warning, "Failed", "Error: %v", err)
		cs.lastTerm = &api.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", FinishedAt: now.UTC()}
		cs.starts++
		k.afterExit(pod, cs, 0, 128)
		return max(cs.nextStart.Sub(now), time.Millisecond)
	}
	k.rec.Eventf(ctx, pod.Key(), events.Normal, "Started", "Started container %s", c.Name)
	return 0
}

// exited records how the current process ended and whether, and when, it
// is restarted.
func (k *kubelet) exited(ctx context.Context, pod *api.Pod, c api.Container, cs *ctrState) {
	k.mu.Lock()
	p := cs.cur
	cs.cur = nil
	k.mu.Unlock()
	if p.stopProbe != nil {
		p.stopProbe()
	}
	cs.ready.set(false)
	reason := "Completed"
	if p.exit.Code != 0 {
		reason = "Error"
	}
	cs.lastTerm = &api.ContainerStateTerminated{ExitCode: int32(p.exit.Code), Signal: int32(p.exit.Signal), Reason: reason,
		StartedAt: p.startedAt.UTC(), FinishedAt: p.exitAt.UTC()}
	if p.exit.Signal != 0 {
		cs.lastTerm.ExitCode = 128 + int32(p.exit.Signal) // as a shell reports it, and kubelet
	}
	k.afterExit(pod, cs, p.exitAt.Sub(p.startedAt), cs.lastTerm.ExitCode)
	reconcile.LoggerFrom(ctx).Info("container exited", "pod", pod.Key(), "container", c.Name, "pid", p.pid,
		"exit", p.exit.Text, "restartIn", cs.delay, "finished", cs.finished)
}

// afterExit decides, per the restart policy, whether the container
// restarts, and its back-off (pkg/kubelet/kuberuntime's
// computePodActions, ShouldContainerBeRestarted).
func (k *kubelet) afterExit(pod *api.Pod, cs *ctrState, ran time.Duration, code int32) {
	switch pod.Spec.RestartPolicy {
	case api.RestartNever:
		cs.finished = true
		return
	case api.RestartOnFailure:
		if code == 0 {
			cs.finished = true
			return
		}
	}
	cs.crashes, cs.delay = k.backoff.AfterExit(cs.crashes, ran)
	cs.nextStart = cs.lastTerm.FinishedAt.Add(cs.delay)
}

// start starts the container's process, its output appended to its log.
func (k *kubelet) start(pod *api.Pod, c api.Container, cs *ctrState) error {
	var out *os.File
	if !k.cfg.FakeContainers {
		path := LogPath(k.cfg.LogDir, pod, c.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close() // the child has its own descriptor
		out = f
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return errors.New("the agent is shutting down")
	}
	pid, wait, err := k.runner.Start(pod.Key(), c.Command, out)
	if err != nil {
		return err
	}
	p := &process{pid: pid, startedAt: k.cfg.Clock.Now(), done: make(chan struct{})}
	cs.cur = p
	cs.starts++
	key := pod.Key()
	k.wg.Go(func() {
		exit := wait()
		p.exit, p.exitAt = exit, k.cfg.Clock.Now()
		close(p.done)
		k.notify(key)
	})
	if c.ReadinessProbe != nil {
		pctx, cancel := context.WithCancel(context.Background())
		p.stopProbe = cancel
		k.wg.Go(func() { k.probe(pctx, key, *c.ReadinessProbe, &cs.ready) })
	} else {
		cs.ready.set(true)
	}
	return nil
}

// notify wakes pod key's reconcile, unless the agent is shutting down.
func (k *kubelet) notify(key string) {
	select {
	case k.wake <- key:
	case <-k.quit:
	}
}

// stopPod stops pod key's processes, if any, forgets the pod, and returns
// the names of the containers it stops. The processes get their grace
// (terminationGracePeriodSeconds) in the background; shutdown waits for
// them.
func (k *kubelet) stopPod(key string, grace time.Duration) (stopped []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := k.state[key]
	if ps == nil || k.closed {
		return nil // shutdown stops what is left
	}
	delete(k.state, key)
	var running []*process
	for name, cs := range ps.containers {
		if cs.cur != nil {
			running = append(running, cs.cur)
			stopped = append(stopped, name)
		}
	}
	k.wg.Go(func() { k.terminate(running, grace) })
	return stopped
}

// gracePeriod is the pod's terminationGracePeriodSeconds, 30 s if unset.
func gracePeriod(p *api.Pod, ok bool) time.Duration {
	if ok && p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// shutdown stops every process and waits until they are gone. Nothing is
// started after its first call.
func (k *kubelet) shutdown() {
	k.mu.Lock()
	k.closed = true
	var running []*process
	for _, ps := range k.state {
		for _, cs := range ps.containers {
			if cs.cur != nil {
				running = append(running, cs.cur)
			}
		}
	}
	k.mu.Unlock()
	k.terminate(running, 2*time.Second)
	k.once.Do(func() { close(k.quit) })
	k.wg.Wait()
	k.runner.Close()
}

// terminate stops each process's readiness probe, then the process:
// SIGTERM to its group, SIGKILL after grace (osproc.Terminate).
func (k *kubelet) terminate(ps []*process, grace time.Duration) {
	ex := make([]osproc.Exiting, len(ps))
	for i, p := range ps {
		if p.stopProbe != nil {
			p.stopProbe()
		}
		ex[i] = osproc.Exiting{PID: p.pid, Done: p.done}
	}
	osproc.Terminate(k.runner.Signal, ex, grace)
}

// podRef names a pod as kubelet's events do: name_namespace(uid).
func podRef(p *api.Pod) string { return fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID) }
