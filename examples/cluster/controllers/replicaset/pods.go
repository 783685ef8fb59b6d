package replicaset

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

// nameAttempts bounds how many generated names a create tries before it
// gives up: a taken name is a conflict, and another suffix is drawn.
const nameAttempts = 5

// IsPodActive reports whether p counts towards its ReplicaSet's replicas:
// not Succeeded, not Failed, and not terminating (controller_utils.go
// IsPodActive; DeletionRequested is this example's deletionTimestamp).
func IsPodActive(p api.Pod) bool {
	return p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed && !p.Deleting()
}

// manageReplicas creates or deletes pods until rs has its replicas
// (replica_set.go manageReplicas); diff is active pods minus replicas.
func (r *reconciler) manageReplicas(ctx context.Context, key string, rs api.ReplicaSet, active []namedPod, diff int) error {
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		_, err := SlowStartBatch(n, 1, func() error { return r.createPod(ctx, key, rs) })
		return err
	case diff > 0:
		n := min(diff, BurstReplicas)
		pods := make([]api.Pod, len(active))
		for i, p := range active {
			pods[i] = p.Pod
		}
		var errs []error
		for _, i := range PodsToDelete(pods, pods, n, r.clock.Now()) {
			errs = append(errs, r.deletePod(ctx, key, active[i].key))
		}
		return errors.Join(errs...)
	}
	return nil
}

// SlowStartBatch calls fn count times in batches of initial, 2×initial,
// 4×initial, … and stops after the first batch in which a call fails,
// so that a create that fails (a quota, an API server that rejects pods)
// fails a few times, not count times (replica_set.go slowStartBatch). It
// returns how many calls succeeded and the first error. Kubernetes runs a
// batch's calls in parallel; here they run one after another, so that a
// simulation replays the same writes: the counts are the same.
func SlowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining, successes := count, 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		var first error
		for range batch {
			if err := fn(); err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			successes++
		}
		if first != nil {
			return successes, first
		}
		remaining -= batch
	}
	return successes, nil
}

// NewPod returns the pod rs creates from its template, named name with a
// fresh UID: the template's labels, annotations and spec, and rs as its
// controller owner (controller_utils.go GetPodFromTemplate).
func NewPod(rs api.ReplicaSet, name, uid string, created time.Time) api.Pod {
	meta := api.ObjectMeta{Name: name, Namespace: rs.Namespace, UID: uid, CreationTimestamp: created}
	meta.Labels = maps.Clone(rs.Spec.Template.Metadata.Labels)
	meta.Annotations = maps.Clone(rs.Spec.Template.Metadata.Annotations)
	meta.OwnerReferences = []api.OwnerReference{ControllerRef(rs)}
	spec := rs.Spec.Template.Spec
	spec.Containers = slices.Clone(spec.Containers)
	spec.Tolerations = slices.Clone(spec.Tolerations)
	return api.Pod{Metadata: meta, Spec: spec}
}

// createPod creates one pod for rs, named "<rs>-<suffix>", and records
// SuccessfulCreate or FailedCreate on the ReplicaSet.
func (r *reconciler) createPod(ctx context.Context, key string, rs api.ReplicaSet) error {
	var err error
	for range nameAttempts {
		name := rs.Name + "-" + r.suffix()
		pod := NewPod(rs, name, r.uid(), r.clock.Now().UTC())
		var rev informer.Revision
		rev, err = r.pods.Create(ctx, api.Key(rs.Namespace, name), pod)
		if errors.Is(err, informer.ErrConflict) {
			continue // the name is taken: draw another
		}
		if err != nil {
			break
		}
		reconcile.Wrote(ctx, r.podInf, rev)
		r.events.Eventf(ctx, key, events.Normal, EventSuccessfulCreate, "Created pod: %s", name)
		return nil
	}
	r.events.Eventf(ctx, key, events.Warning, EventFailedCreate, "Error creating: %v", err)
	return fmt.Errorf("replicaset %s: create pod: %w", key, err)
}

// deletePod deletes pod podKey of ReplicaSet key: at once, or, if it has
// finalizers, by requesting its deletion (it is terminating, and no longer
// counts).
func (r *reconciler) deletePod(ctx context.Context, key, podKey string) error {
	rev, op, err := informer.RequestDelete(ctx, r.pods, podKey)
	if errors.Is(err, informer.ErrNotFound) {
		return nil
	}
	if err != nil {
		r.events.Eventf(ctx, key, events.Warning, EventFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("replicaset %s: delete pod %s: %w", key, podKey, err)
	}
	reconcile.Wrote(ctx, r.podInf, rev)
	if op != informer.Unchanged {
		_, name := api.SplitKey(podKey)
		r.events.Eventf(ctx, key, events.Normal, EventSuccessfulDelete, "Deleted pod: %s", name)
	}
	return nil
}

// Suffix returns five random characters from Kubernetes' alphabet for
// generated names (lowercase consonants and digits without confusable
// ones: apimachinery's util/rand.String).
func Suffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
