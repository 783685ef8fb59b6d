package deployment

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/controllers/garbagecollector"
	"github.com/converge-go/converge/examples/cluster/controllers/replicaset"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// simWorld is the workload controllers under the simulation kit: the
// stores, and what the bounds oracle has checked so far.
type simWorld struct {
	d    *memstore.Store[string, api.Deployment]
	rs   *memstore.Store[string, api.ReplicaSet]
	pods *memstore.Store[string, api.Pod]

	// minReady is web's minReadySeconds.
	minReady int32

	mu      sync.Mutex
	checked informer.Revision // pod store revisions checked by the bounds oracle
	armedAt informer.Revision // web's availability bound holds after this pod store revision (0: not yet)
	// at is the virtual time of each pod store revision, up to stamped.
	at      map[informer.Revision]time.Time
	stamped informer.Revision
	// most and fewest are web's most active and fewest available pods at
	// any pod store revision after armedAt (fewest -1: none seen yet).
	most, fewest int32
}

func newSimWorld() *simWorld { return newSimWorldMinReady(0)() }

// newSimWorldMinReady returns a world whose web has minReadySeconds
// minReady.
func newSimWorldMinReady(minReady int32) func() *simWorld {
	return func() *simWorld {
		return &simWorld{d: must.Do(memstore.New[string, api.Deployment]()), rs: must.Do(memstore.New[string, api.ReplicaSet]()),
			pods: must.Do(memstore.New[string, api.Pod]()), minReady: minReady, at: map[informer.Revision]time.Time{}, fewest: -1}
	}
}

// stamp notes the virtual time of the pod store revisions written since
// the last stamp.
func (w *simWorld) stamp() {
	now := time.Now() // virtual in the kit's bubble
	w.mu.Lock()
	defer w.mu.Unlock()
	head := w.pods.Revision()
	for rev := w.stamped + 1; rev <= head; rev++ {
		w.at[rev] = now
	}
	w.stamped = max(w.stamped, head)
}

// timedPods stamps the time of every pod write it makes, for the
// availability oracle: a pod becomes available minReadySeconds after it
// turned ready, with no write, so between two writes the fewest pods are
// available right at the first, at its time.
type timedPods struct {
	informer.Store[string, api.Pod]
	w *simWorld
}

// Revision is the store's head revision, which informers read (Head).
func (s timedPods) Revision() informer.Revision { return s.w.pods.Revision() }

func (s timedPods) Create(ctx context.Context, key string, v api.Pod) (informer.Revision, error) {
	defer s.w.stamp()
	return s.Store.Create(ctx, key, v)
}

func (s timedPods) Update(ctx context.Context, key string, v api.Pod, rev informer.Revision) (informer.Revision, error) {
	defer s.w.stamp()
	return s.Store.Update(ctx, key, v, rev)
}

func (s timedPods) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	defer s.w.stamp()
	return s.Store.Delete(ctx, key, rev)
}

// simDeployments are the workload's: web rolls and rolls back; batch is
// deleted in foreground, gone in the background, and keep with its
// ReplicaSet orphaned. Their bounds are fixed: only templates change.
var simDeployments = map[string]struct {
	replicas           int32
	surge, unavailable string
}{
	"web":   {4, "1", "1"},
	"batch": {2, "", ""},
	"gone":  {1, "", ""},
	"keep":  {2, "", ""},
}

func simDeployment(name, version string, minReady int32) api.Deployment {
	s := simDeployments[name]
	d := newDeployment(name, s.replicas, s.surge, s.unavailable)
	d.Spec.Template.Spec.Containers[0].Command[2] = version
	if name == "web" {
		d.Spec.MinReadySeconds = minReady
	}
	return d
}

// simProcess is one incarnation of the control plane's workload part: the
// three controllers, and a fake scheduler and node agent that bind each
// pod and make it ready (a node agent is another process in the cluster;
// here it dies with the control plane, which only adds crash points).
func simProcess(p *simtest.Process, w *simWorld) error {
	c := &api.Cluster{
		Stores: api.Stores{
			Deployments: simtest.Wrap(p, "deployments", w.d),
			ReplicaSets: simtest.Wrap(p, "replicasets", w.rs),
			Pods:        timedPods{Store: simtest.Wrap(p, "pods", w.pods), w: w},
		},
		Clock:  clock.RealClock{}, // virtual in the kit's bubble
		Logger: p.Logger(),
		Recorder: func(component string) *events.Recorder {
			return must.Do(events.NewRecorder(component, events.WithSink(must.Do(events.NewMemorySink(0)))))
		},
	}
	c.Informers = api.Informers{
		Deployments: must.Do(informer.New("deployments", c.Stores.Deployments, informer.WithLogger(p.Logger()))),
		ReplicaSets: must.Do(informer.New("replicasets", c.Stores.ReplicaSets, informer.WithLogger(p.Logger()))),
		Pods:        must.Do(informer.New("pods", c.Stores.Pods, informer.WithLogger(p.Logger()))),
	}
	count := func(name string) func(reconcile.Reconciler[string]) reconcile.Reconciler[string] {
		return func(r reconcile.Reconciler[string]) reconcile.Reconciler[string] { return simtest.Count(p, name, r) }
	}
	one := []reconcile.Option{reconcile.WithWorkers(1)}
	seq := 0 // one worker names pods at a time
	rs, err := replicaset.New(c, replicaset.Options{Wrap: count("replicaset"), Controller: one,
		Suffix: func() string { seq++; return fmt.Sprintf("%d-%d", p.Incarnation(), seq) }})
	if err != nil {
		return err
	}
	d, err := New(c, Options{Wrap: count("deployment"), Controller: one})
	if err != nil {
		return err
	}
	gc, err := garbagecollector.New(c, garbagecollector.Options{Wrap: count("garbagecollector"), Controller: one})
	if err != nil {
		return err
	}
	agent, err := reconcile.New("agent", count("agent")(reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		_, _, err := informer.Update(ctx, c.Stores.Pods, key, func(p *api.Pod) error {
			if p.Deleting() {
				return nil
			}
			p.Spec.NodeName = "n1"
			p.Status.Phase = api.PodRunning
			object.SetCondition(&p.Status.Conditions, object.Condition{Type: api.PodReady, Status: object.ConditionTrue}, c.Clock.Now())
			return nil
		})
		if err != nil && !strings.Contains(err.Error(), informer.ErrNotFound.Error()) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	})), reconcile.For(c.Informers.Pods, func(ch reconcile.Change[string, api.Pod]) bool {
		return ch.Kind != reconcile.Deleted && !ch.New.IsReady()
	}), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
	if err != nil {
		return err
	}
	p.Go("deployments informer", c.Informers.Deployments.Run)
	p.Go("replicasets informer", c.Informers.ReplicaSets.Run)
	p.Go("pods informer", c.Informers.Pods.Run)
	p.Add(rs)
	p.Add(d)
	p.Add(gc)
	p.Add(agent)
	return nil
}

func applyStep(name, version string) func(context.Context, *simWorld) error {
	return func(ctx context.Context, w *simWorld) error {
		_, _, err := informer.CreateOrUpdate(ctx, w.d, "default/"+name, func(d *api.Deployment) error {
			if d.UID == "" {
				*d = simDeployment(name, version, w.minReady)
				return nil
			}
			d.Spec = simDeployment(name, version, w.minReady).Spec
			return nil
		})
		return err
	}
}

// simWorkload is what the user does; with awaitRunning, each delete waits
// until the user has seen that Deployment run.
func simWorkload(awaitRunning bool) []func(context.Context, *simWorld) error {
	return []func(context.Context, *simWorld) error{
		func(ctx context.Context, w *simWorld) error {
			for _, name := range []string{"web", "batch", "gone", "keep"} {
				if err := applyStep(name, "v1")(ctx, w); err != nil {
					return err
				}
			}
			return nil
		},
		func(ctx context.Context, w *simWorld) error {
			// The availability bound holds from web's first complete rollout on.
			if err := simtest.Await(ctx, func() error { return webDone(ctx, w, "v1") }); err != nil {
				return err
			}
			w.mu.Lock()
			w.armedAt = w.pods.Revision()
			w.mu.Unlock()
			return nil
		},
		applyStep("web", "v2"),
		func(ctx context.Context, w *simWorld) error {
			// rollout undo, once v2's rollout has begun (the user saw it in
			// rollout status), maybe before it is done.
			if err := simtest.Await(ctx, func() error {
				d, _, _, err := w.d.Get(ctx, "default/web")
				if err != nil || d.Status.ObservedGeneration < d.Generation {
					return fmt.Errorf("v2 not observed yet: %v", err)
				}
				return nil
			}); err != nil {
				return err
			}
			return applyStep("web", "v1")(ctx, w)
		},
		// Then two rollouts that run to completion, which must use their
		// allowance (rolloutUsedItsAllowance): an undone one may not have
		// begun to.
		awaitWeb("v1"),
		applyStep("web", "v2"),
		awaitWeb("v2"),
		applyStep("web", "v1"),
		deleteStep("batch", api.FinalizerForeground, awaitRunning),
		deleteStep("gone", "", awaitRunning),
		deleteStep("keep", api.FinalizerOrphan, awaitRunning),
	}
}

// deleteStep deletes a Deployment as ctl delete --cascade does: the
// policy's finalizer (none for background), then the deletion request.
// With await, only once it runs (the user deletes what they saw running):
// deleted before its controller made its ReplicaSet, a Deployment leaves
// nothing to orphan, which is no fault of the controllers.
func deleteStep(name, finalizer string, await bool) func(context.Context, *simWorld) error {
	return func(ctx context.Context, w *simWorld) error {
		if await {
			if err := simtest.Await(ctx, func() error {
				d, _, _, err := w.d.Get(ctx, "default/"+name)
				if err != nil || !rolloutDone(d) {
					return fmt.Errorf("%s not running yet: %v", name, err)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if finalizer != "" {
			if _, _, err := informer.Update(ctx, w.d, "default/"+name, func(d *api.Deployment) error {
				d.AddFinalizer(finalizer)
				return nil
			}); err != nil {
				return err
			}
		}
		_, _, err := informer.RequestDelete(ctx, w.d, "default/"+name)
		return err
	}
}

// awaitWeb waits until web's rollout to version is complete.
func awaitWeb(version string) func(context.Context, *simWorld) error {
	return func(ctx context.Context, w *simWorld) error {
		return simtest.Await(ctx, func() error { return webDone(ctx, w, version) })
	}
}

// webDone: web's rollout to version is complete, as rollout status says.
func webDone(ctx context.Context, w *simWorld, version string) error {
	d, _, ok, err := w.d.Get(ctx, "default/web")
	if err != nil || !ok {
		return fmt.Errorf("web: %v %v", ok, err)
	}
	if !rolloutDone(d) || d.Status.ObservedGeneration != d.Generation || d.Spec.Template.Spec.Containers[0].Command[2] != version {
		return fmt.Errorf("web not rolled out to %s: %+v", version, d.Status)
	}
	return nil
}

// boundsAtEveryRevision replays every pod store revision since the last
// check: at none may a Deployment have more than replicas+maxSurge active
// pods, nor web (once armed) fewer than replicas−maxUnavailable available
// ones (ready for its minReadySeconds at the revision's time); and every
// pod has exactly one controller owner. It keeps web's extremes for
// rolloutUsedItsAllowance.
func boundsAtEveryRevision(w *simWorld) error {
	ctx := context.Background()
	w.mu.Lock()
	defer w.mu.Unlock()
	head := w.pods.Revision()
	for rev := w.checked + 1; rev <= head; rev++ {
		es, err := w.pods.ListAt(ctx, rev)
		if err != nil {
			return err
		}
		at, ok := w.at[rev]
		if !ok && w.minReady > 0 {
			return fmt.Errorf("pods at revision %d: no time stamped (a pod write bypassed timedPods)", rev)
		}
		armed := w.armedAt != 0 && rev > w.armedAt
		active, available, err := checkBounds(es, armed, w.minReady, at)
		if err != nil {
			return fmt.Errorf("pods at revision %d: %w", rev, err)
		}
		if armed {
			w.most = max(w.most, active)
			if w.fewest < 0 || available < w.fewest {
				w.fewest = available
			}
		}
	}
	w.checked = head
	return nil
}

// checkBounds checks one revision's pods (see boundsAtEveryRevision) and
// returns web's active and available pods.
func checkBounds(pods []informer.Entry[string, api.Pod], armed bool, minReady int32, at time.Time) (int32, int32, error) {
	active, available := map[string]int32{}, map[string]int32{}
	for _, e := range pods {
		n := 0
		for _, r := range e.Value.OwnerReferences {
			if r.Controller {
				n++
			}
		}
		if n != 1 {
			return 0, 0, fmt.Errorf("pod %s has %d controller owners", e.Key, n)
		}
		deploy, _, _ := strings.Cut(e.Value.Name, "-")
		if replicaset.IsPodActive(e.Value) {
			active[deploy]++
			mr := int32(0) // the other Deployments' minReadySeconds
			if deploy == "web" {
				mr = minReady
			}
			if replicaset.IsPodAvailable(e.Value, mr, at) {
				available[deploy]++
			}
		}
	}
	for name := range simDeployments {
		most, fewest := simBounds(name)
		if active[name] > most {
			return 0, 0, fmt.Errorf("%s has %d active pods, more than replicas + surge = %d", name, active[name], most)
		}
		if name == "web" && armed && available[name] < fewest {
			return 0, 0, fmt.Errorf("web has %d available pods (minReadySeconds %d), fewer than replicas - unavailable = %d",
				available[name], minReady, fewest)
		}
	}
	return active["web"], available["web"], nil
}

// simBounds are a Deployment's most active pods and fewest available ones
// during a rollout: replicas+maxSurge and replicas−maxUnavailable.
func simBounds(name string) (most, fewest int32) {
	s := simDeployments[name]
	surge, unavailable, _ := ResolveFenceposts(cmpOr(s.surge, DefaultMaxSurge), cmpOr(s.unavailable, DefaultMaxUnavailable), s.replicas)
	return s.replicas + surge, s.replicas - unavailable
}

// rolloutUsedItsAllowance: web's rollouts reached both bounds, so the
// bounds oracle has no margin to hide in. The rolling update adds a pod
// up to replicas+maxSurge and takes one away down to
// replicas−maxUnavailable available; a controller that never did would
// hold the bounds by making slow progress, or none.
func rolloutUsedItsAllowance(w *simWorld) error {
	if err := boundsAtEveryRevision(w); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	most, fewest := simBounds("web")
	if w.most != most || w.fewest != fewest {
		return fmt.Errorf("web's rollouts had at most %d active pods and at least %d available, want exactly %d and %d",
			w.most, w.fewest, most, fewest)
	}
	return nil
}

// convergedWorkloads: web runs its 4 pods of v1, ready; batch and gone,
// their ReplicaSets and pods are gone; keep is gone, and its orphaned
// ReplicaSet runs its 2 pods.
func convergedWorkloads(w *simWorld) error {
	ctx := context.Background()
	if err := webDone(ctx, w, "v1"); err != nil {
		return err
	}
	ds, _, _ := w.d.List(ctx)
	if len(ds) != 1 {
		return fmt.Errorf("%d deployments, want web alone", len(ds))
	}
	rss, _, _ := w.rs.List(ctx)
	for _, e := range rss {
		if name, _, _ := strings.Cut(e.Value.Name, "-"); name != "web" && name != "keep" {
			return fmt.Errorf("replicaset %s is left", e.Key)
		}
		if strings.HasPrefix(e.Value.Name, "keep-") && len(e.Value.OwnerReferences) != 0 {
			return fmt.Errorf("replicaset %s is not orphaned: %v", e.Key, e.Value.OwnerReferences)
		}
	}
	pods, _, _ := w.pods.List(ctx)
	count := map[string]int{}
	for _, e := range pods {
		name, _, _ := strings.Cut(e.Value.Name, "-")
		count[name]++
		if e.Value.Spec.Containers[0].Command[2] != "v1" || !e.Value.IsReady() {
			return fmt.Errorf("pod %s is left: %s %s", e.Key, e.Value.Spec.Containers[0].Command, e.Value.Status.Phase)
		}
	}
	if want := map[string]int{"web": 4, "keep": 2}; !maps.Equal(count, want) {
		var names []string
		for _, e := range rss {
			names = append(names, fmt.Sprintf("%s(%d, owners %d, deleting %v)", e.Key, api.Replicas(e.Value.Spec.Replicas),
				len(e.Value.OwnerReferences), e.Value.Deleting()))
		}
		return fmt.Errorf("pods by deployment %v, want %v; replicasets %v", count, want, names)
	}
	return nil
}

// observeSim: per Deployment its status without times; per ReplicaSet (by
// its hash name) replicas, revision and status; pods counted per
// ReplicaSet and readiness. Pod names and UIDs are left out.
func observeSim(w *simWorld) any {
	ctx := context.Background()
	var out []string
	ds, _, _ := w.d.List(ctx)
	for _, e := range ds {
		st := e.Value.Status
		conds := make([]string, 0, len(st.Conditions))
		for _, c := range st.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		out = append(out, fmt.Sprintf("deployment %s rev=%s replicas=%d updated=%d ready=%d available=%d %v", e.Key,
			e.Value.Annotations[api.RevisionAnnotation], st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, conds))
	}
	rss, _, _ := w.rs.List(ctx)
	for _, e := range rss {
		v := e.Value
		out = append(out, fmt.Sprintf("replicaset %s replicas=%d rev=%s history=%s status=%d/%d/%d", e.Key,
			api.Replicas(v.Spec.Replicas), v.Annotations[api.RevisionAnnotation], v.Annotations[RevisionHistoryAnnotation],
			v.Status.Replicas, v.Status.ReadyReplicas, v.Status.AvailableReplicas))
	}
	pods, _, _ := w.pods.List(ctx)
	for _, e := range pods {
		owner, _ := api.ControllerOf(e.Value.Metadata)
		out = append(out, fmt.Sprintf("pod of %s ready=%v", owner.Name, e.Value.IsReady()))
	}
	slices.Sort(out)
	return out
}

func workloadsSpec(mode simtest.Mode, runs int, kinds ...simtest.Kind) simtest.Spec[*simWorld] {
	return simtest.Spec[*simWorld]{
		World:      newSimWorld,
		Process:    simProcess,
		Workload:   simWorkload(true),
		Observe:    observeSim,
		Invariants: []func(*simWorld) error{boundsAtEveryRevision},
		Converged:  []func(*simWorld) error{convergedWorkloads, rolloutUsedItsAllowance},
		Mode:       mode,
		Runs:       runs,
		Kinds:      kinds,
		Seed:       1,
	}
}

func TestTheWorkloadControllersShouldHoldTheRolloutBoundsThroughACrashAfterEveryWrite(t *testing.T) {
	r := simtest.Run(t, workloadsSpec(simtest.Exhaustive, 0))
	assert.Greater(t, r.Writes, 30, "the workload makes the controllers write")
	assert.Equal(t, r.Writes, r.Schedules, "one schedule per write")
}

func TestTheWorkloadControllersShouldHoldTheRolloutBoundsUnderSampledFaults(t *testing.T) {
	r := simtest.Run(t, workloadsSpec(simtest.Sampled, 100))
	assert.GreaterOrEqual(t, r.Schedules, 100, "-simtest.runs may ask for more")
}

// With minReadySeconds a pod counts as available only once it has been
// ready that long, with no write when it becomes so: the oracle counts
// web's available pods at every pod store revision at the time it was
// written, the worst moment until the next write. The faults are the
// control plane's (crashes, stale restarts, panics, ambiguous writes,
// coalesced, duplicated and expired watches); no node fails here, and
// the pods never do, so availability is the rollout's alone to keep.
func TestARolloutWithMinReadySecondsShouldKeepItsPodsAvailableUnderSampledFaults(t *testing.T) {
	spec := workloadsSpec(simtest.Sampled, 100)
	spec.World = newSimWorldMinReady(5)
	spec.Idle = 6 * time.Second // a rollout step waits minReadySeconds without a write
	spec.Seed = 2
	r := simtest.Run(t, spec)
	assert.GreaterOrEqual(t, r.Schedules, 100, "-simtest.runs may ask for more")
}

// A watch that expired and relisted left ReplicaSet statuses that still
// counted, as available, pods about to be deleted: a rollout step scaled
// the other ReplicaSet down too, to 2 ready pods of 4 with maxUnavailable
// 1. A ReplicaSet's available pods now count at most up to its replicas
// and its available pods in the cache.
func TestARolloutStepShouldNotCountPodsBeingDeletedAsAvailable(t *testing.T) {
	runSchedule(t, "seed=57 expire=0.05")
}

// Caches behind the store after a watch expired let a rollout step add
// pods while the old ones it counted as gone still ran: 6 pods for 4
// replicas and a surge of 1. A rollout step now waits for the ReplicaSet
// and pod caches to reach the stores' heads.
func TestARolloutStepShouldWaitForCachesThatLagTheStore(t *testing.T) {
	runSchedule(t, "seed=890 expire=0.05")
}

// With coalesced watch events after a crash, the pod cache was behind the
// store's head every time keep's key came up, because the head had moved
// on meanwhile: keep waited until it was deleted, and never made its
// ReplicaSet, so orphaning left no pods. A key now waits once for the
// head as it was when it found its caches behind.
func TestADeploymentShouldNotWaitForeverForCachesOfABusyStore(t *testing.T) {
	require.NoError(t, flag.Set("simtest.schedule", "seed=4 crash@15 coalesce=1s"))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	spec := workloadsSpec(simtest.Sampled, 1)
	spec.Workload = simWorkload(false) // deletes that do not wait for keep to run
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure)
}

// A Deployment that found its ReplicaSet cache one revision behind the
// store recorded the head with reconcile.Wrote and asked to come back in
// a second. The cache caught up within milliseconds, but Wrote only gates
// a key that comes up, it does not queue one: keep waited out the whole
// second, and the user, who does not wait here, deleted it 33 ms (virtual)
// after creating it, before it had made its ReplicaSet, so orphaning left
// no pods. A key waiting for its caches now comes up at once, and the
// read-your-writes gate parks it until they reach the head.
func TestADeploymentWaitingForItsCachesShouldBeReconciledAsSoonAsTheyCatchUp(t *testing.T) {
	require.NoError(t, flag.Set("simtest.schedule", "seed=2644 expire=0.05"))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	spec := workloadsSpec(simtest.Sampled, 1)
	spec.Workload = simWorkload(false)
	r := simtest.Check(t, spec)
	assert.Empty(t, r.Failure)
}

// A panic between a pod's create and its reconcile.Wrote (as a create
// that timed out after it committed would be) left the write unrecorded;
// the retry, on a pod cache that coalescing held a second behind, created
// the pod again: web ran 6 pods for 4 replicas and a surge of 1. A failed
// ReplicaSet reconcile now records the pod store's head, and its retry
// waits until the cache has it.
func TestAReplicaSetReconcileThatFailedAfterACreateShouldNotCreateThePodAgain(t *testing.T) {
	runSchedule(t, "seed=362 panic@64 coalesce=1s")
}

// runSchedule runs one schedule of the workload and fails on its report.
func runSchedule(t *testing.T, schedule string) {
	require.NoError(t, flag.Set("simtest.schedule", schedule))
	t.Cleanup(func() { _ = flag.Set("simtest.schedule", "") })
	r := simtest.Check(t, workloadsSpec(simtest.Sampled, 1))
	assert.Empty(t, r.Failure)
	assert.Equal(t, 1, r.Schedules)
}
