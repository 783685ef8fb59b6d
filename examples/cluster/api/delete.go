package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-go/converge/informer"
)

// Finalizers that record a deletion's propagation policy, as the Kubernetes
// API server records them (apiserver's registry/generic/registry/store.go):
// the garbage collector deletes the dependents first (foreground) or
// strips their owner references (orphan), then removes the finalizer,
// which completes the deletion.
const (
	FinalizerForeground = "foregroundDeletion"
	FinalizerOrphan     = "orphan"
)

// Propagation policies of a deletion, as kubectl's --cascade and the
// API's propagationPolicy name them.
const (
	PropagationBackground = "Background"
	PropagationForeground = "Foreground"
	PropagationOrphan     = "Orphan"
)

// Delete asks for key's deletion with a propagation policy: Background
// (the default, also for "") deletes it now, unless finalizers hold it,
// and leaves its dependents to the garbage collector; Foreground and
// Orphan first add their finalizer, so that the key stays, marked deleting
// (DeletionRequested, set to now), until the garbage collector has dealt
// with its dependents and removed the finalizer. A key already deleting
// is left as it is. Every write is at the revision read; a conflict reads
// again. V is one of the kinds (MetaOf).
//
// It returns an error wrapping informer.ErrNotFound if key is absent, and
// ErrPropagationPolicy for a policy it does not know.
func Delete[V any](ctx context.Context, s informer.ReadWriter[string, V], key, policy string, now func() time.Time) error {
	var finalizer string
	switch policy {
	case PropagationForeground:
		finalizer = FinalizerForeground
	case PropagationOrphan:
		finalizer = FinalizerOrphan
	case PropagationBackground, "":
	default:
		return fmt.Errorf("%w %q: supported values: %q, %q, %q",
			ErrPropagationPolicy, policy, PropagationBackground, PropagationForeground, PropagationOrphan)
	}
	for {
		v, rev, ok, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("delete %s: %w", key, informer.ErrNotFound)
		}
		m := MetaOf(&v)
		if m == nil {
			return fmt.Errorf("delete %s: %T is not a kind of the cluster", key, v)
		}
		if m.Deleting() {
			return nil
		}
		if finalizer != "" {
			m.AddFinalizer(finalizer)
		}
		if len(m.Finalizers) == 0 {
			_, err = s.Delete(ctx, key, rev)
		} else {
			m.DeletionRequested = now().UTC()
			_, err = s.Update(ctx, key, v, rev)
		}
		if !errors.Is(err, informer.ErrConflict) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ErrPropagationPolicy is a deletion's unknown propagation policy.
var ErrPropagationPolicy = errors.New("unsupported propagation policy")
