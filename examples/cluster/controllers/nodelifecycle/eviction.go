package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// eviction is the taint eviction controller, with the node lifecycle
// controller's per-pod work (marking pods not Ready) and pod garbage
// collection: all three decide on one bound pod and its node.
type eviction struct {
	pods      *informer.Informer[string, api.Pod]
	nodes     *informer.Informer[string, api.Node]
	podStore  informer.ReadWriter[string, api.Pod]
	nodeStore informer.ReadWriter[string, api.Node]
	clock     clock.PassiveClock
	events    *events.Recorder

	defaultToleration int64

	mu sync.Mutex
	// firstSeen stands in for the TimeAdded of a NoExecute taint written
	// without one: when this process first saw it, by node and taint key;
	// guarded by mu.
	firstSeen map[string]time.Time
}

// boundPod lets through the changes of pods bound to a node.
func boundPod(ch reconcile.Change[string, api.Pod]) bool {
	return ch.Kind != reconcile.Deleted && ch.New.Spec.NodeName != ""
}

// nodeTaintsOrReadyChanged lets through the node changes that matter to
// the pods on it: its taints, its Ready condition, its deletion.
func nodeTaintsOrReadyChanged(ch reconcile.Change[string, api.Node]) bool {
	switch ch.Kind {
	case reconcile.Added:
		return len(ch.New.Spec.Taints) > 0 || readyStatus(ch.New) != object.ConditionTrue
	case reconcile.Deleted:
		return true
	}
	return !reflect.DeepEqual(ch.Old.Spec.Taints, ch.New.Spec.Taints) || readyStatus(ch.Old) != readyStatus(ch.New) || ch.Resync
}

func (e *eviction) podsOnNode(name string, _ api.Node) []string {
	entries := e.pods.ByIndex(api.PodNodeNameIndex, name)
	keys := make([]string, len(entries))
	for i, en := range entries {
		keys[i] = en.Key
	}
	return keys
}

func (e *eviction) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	pod, ok := e.pods.Get(key)
	if !ok || pod.Spec.NodeName == "" || pod.Deleting() {
		return reconcile.Result{}, nil
	}
	node, ok := e.nodes.Get(pod.Spec.NodeName)
	if !ok {
		return reconcile.Result{}, e.collectOrphan(ctx, key, pod)
	}
	now := e.clock.Now()
	if err := e.markNotReady(ctx, key, pod, node); err != nil {
		return reconcile.Result{}, err
	}
	at, evict := e.evictionTime(pod, node, now)
	if !evict {
		return reconcile.Result{}, nil
	}
	if at.After(now) {
		return reconcile.Result{RequeueAfter: at.Sub(now)}, nil
	}
	// Kubernetes' message (k8s@v1.37.2:pkg/controller/tainteviction/taint_eviction.go
	// deletePodHandler).
	e.events.Eventf(ctx, key, events.Normal, EventTaintManagerEviction, "Marking for deletion Pod %s", key)
	return reconcile.Result{}, deletePod(ctx, e.podStore, key, pod.UID, now)
}

// collectOrphan deletes a pod bound to a node that no longer exists, as
// PodGC does (k8s@v1.37.2:pkg/controller/podgc/gc_controller.go
// gcOrphaned); the store, not the cache, must say the node is gone, since
// the cache may not have a node that was just created.
func (e *eviction) collectOrphan(ctx context.Context, key string, pod api.Pod) error {
	_, _, ok, err := e.nodeStore.Get(ctx, pod.Spec.NodeName)
	if err != nil {
		return fmt.Errorf("read node %s: %w", pod.Spec.NodeName, err)
	}
	if ok {
		return nil // the informer will bring it, and reconcile the pod again
	}
	e.events.Eventf(ctx, key, events.Normal, EventPodGarbageCollected, "Deleting pod %s: its node %s no longer exists", key, pod.Spec.NodeName)
	return deletePod(ctx, e.podStore, key, pod.UID, e.clock.Now())
}

// markNotReady sets a pod's Ready condition False while its node is not
// Ready, as MarkPodsNotReady does (k8s@v1.37.2:pkg/controller/util/node/controller_utils.go):
// only a Ready condition the pod has is changed, its reason kept.
func (e *eviction) markNotReady(ctx context.Context, key string, pod api.Pod, node api.Node) error {
	status := readyStatus(node)
	if status == object.ConditionTrue || status == "" || !pod.IsReady() {
		return nil
	}
	_, _, err := informer.Update(ctx, e.podStore, key, func(p *api.Pod) error {
		if p.UID != pod.UID || p.Spec.NodeName != node.Name {
			return nil
		}
		c, ok := object.FindCondition(p.Status.Conditions, api.PodReady)
		if !ok || c.Status != object.ConditionTrue {
			return nil
		}
		c.Status, c.LastTransitionTime = object.ConditionFalse, time.Time{}
		object.SetCondition(&p.Status.Conditions, c, e.clock.Now().UTC())
		return nil
	})
	if err != nil && !errors.Is(err, informer.ErrNotFound) {
		return fmt.Errorf("mark %s not ready: %w", key, err)
	}
	return nil
}

// evictionTime returns when the pod must leave its node because of the
// node's NoExecute taints, and false if never: now for a taint it does not
// tolerate; else the earliest TimeAdded + tolerationSeconds over the taints,
// each tolerated by the first toleration that matches it
// (k8s@v1.37.2:pkg/controller/tainteviction/taint_eviction.go
// getMatchingTolerations, getMinTolerationTime). Kubernetes counts from when
// its controller saw the taint; counting from TimeAdded gives the same
// answer after a restart of the controller.
func (e *eviction) evictionTime(pod api.Pod, node api.Node, now time.Time) (time.Time, bool) {
	tolerations := withDefaultTolerations(pod.Spec.Tolerations, e.defaultToleration)
	var at time.Time
	evict := false
	for _, t := range node.Spec.Taints {
		if t.Effect != api.TaintNoExecute {
			continue
		}
		tol, ok := api.TolerationFor(tolerations, t)
		if !ok {
			return now, true
		}
		if tol.TolerationSeconds == nil {
			continue
		}
		added := t.TimeAdded
		if added.IsZero() {
			added = e.seen(node.Name, t.Key, now)
		}
		due := added.Add(time.Duration(max(*tol.TolerationSeconds, 0)) * time.Second)
		if !evict || due.Before(at) {
			at, evict = due, true
		}
	}
	return at, evict
}

func (e *eviction) seen(node, taint string, now time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := node + "\x00" + taint
	if t, ok := e.firstSeen[k]; ok {
		return t
	}
	e.firstSeen[k] = now
	return now
}

// withDefaultTolerations adds what the DefaultTolerationSeconds admission
// plugin adds to a pod that has no toleration of its own for the not-ready
// or unreachable NoExecute taint: one for seconds
// (k8s@v1.37.2:plugin/pkg/admission/defaulttolerationseconds/admission.go).
// Pods written to the store without the API server's admission (by a
// controller) get the same default this way. seconds <= 0 adds none.
func withDefaultTolerations(tolerations []api.Toleration, seconds int64) []api.Toleration {
	if seconds <= 0 {
		return tolerations
	}
	out := tolerations
	for _, key := range controllerTaintKeys {
		covered := false
		for _, t := range tolerations {
			if (t.Key == key || t.Key == "") && (t.Effect == api.TaintNoExecute || t.Effect == "") {
				covered = true
				break
			}
		}
		if !covered {
			s := seconds
			out = append(out[:len(out):len(out)], api.Toleration{Key: key, Operator: api.TolerationOpExists,
				Effect: api.TaintNoExecute, TolerationSeconds: &s})
		}
	}
	return out
}

// deletePod deletes the pod of uid at key: at the revision read, so that a
// pod written meanwhile (another pod of the same name) is never deleted
// by mistake. A pod with finalizers is only marked (DeletionRequested,
// once), and goes when its last finalizer is removed. The mark is written
// here rather than by informer.RequestDelete, which honours finalizers only
// for an object.Object.
func deletePod(ctx context.Context, store informer.ReadWriter[string, api.Pod], key, uid string, now time.Time) error {
	p, rev, ok, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read pod %s: %w", key, err)
	}
	if !ok || p.UID != uid {
		return nil
	}
	if len(p.Finalizers) > 0 {
		if !p.DeletionRequested.IsZero() {
			return nil
		}
		p.DeletionRequested = now.UTC()
		if _, err := store.Update(ctx, key, p, rev); err != nil {
			return fmt.Errorf("mark pod %s for deletion: %w", key, err)
		}
		return nil
	}
	if _, err := store.Delete(ctx, key, rev); err != nil {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	return nil
}
