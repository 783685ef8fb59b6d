package informer

import (
	"context"
	"errors"
	"fmt"

	"github.com/converge-go/converge/object"
)

// Finalize keeps one controller's finalizer, called name, on the value of
// key, and says whether the caller may act on the value (live) or must
// stop because deletion has been requested. v is the value the caller
// read, usually from an informer's cache; the writes go to s, through
// Update (with opts), which reads the key again:
//
//   - v is not Deleting and has name: live, nothing is written.
//   - v is not Deleting and lacks name: name is added before the caller
//     acts, so that a deletion requested from then on waits for the
//     controller, even one requested while it is down. Live, unless the
//     store's value turns out to be Deleting already (name is then not
//     added: the controller has not acted, so there is nothing to clean
//     up) or the key is gone.
//   - v is Deleting and has name: cleanup runs. Once it reports done,
//     name is removed, which deletes the key if it was the last finalizer
//     (see Update's finalizer rule). Not live. A cleanup that is not done
//     yet (it deleted children and waits to see them go) returns false
//     with a nil error: name stays, and the controller runs again when
//     whatever it waits for changes.
//   - v is Deleting and lacks name: not live, nothing to do.
//
// A key that is gone from s by the time of a write is not an error: it is
// not live, and its deletion reconciles it again. Errors: an empty name, a
// nil v or a nil cleanup, before anything is read; cleanup's error as is,
// with name kept; Update's other errors, with live false (the caller must
// not act without its finalizer in place).
//
// This is kube-rs's finalizer() helper: its Apply is the caller's code
// after a live result, its Cleanup is cleanup.
func Finalize[K comparable, V any, P interface {
	*V
	object.Object
}](ctx context.Context, s ReadWriter[K, V], key K, v P, name string,
	cleanup func(ctx context.Context) (done bool, err error), opts ...UpdateOption) (live bool, err error) {
	switch {
	case name == "":
		return false, errors.New("informer: Finalize: empty finalizer name")
	case v == nil:
		return false, errors.New("informer: Finalize: nil value")
	case cleanup == nil:
		return false, errors.New("informer: Finalize: nil cleanup")
	}
	m := v.ObjectMeta()
	switch {
	case !m.Deleting() && m.HasFinalizer(name):
		return true, nil
	case !m.Deleting():
		deleting := false
		_, _, err := Update(ctx, s, key, func(cur *V) error {
			cm := P(cur).ObjectMeta()
			deleting = cm.Deleting()
			cm.AddFinalizer(name) // a no-op if Deleting
			return nil
		}, opts...)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("informer: Finalize %v: add finalizer %q: %w", key, name, err)
		}
		return !deleting, nil
	case !m.HasFinalizer(name):
		return false, nil
	}
	done, err := cleanup(ctx)
	if err != nil || !done {
		return false, err
	}
	_, _, err = Update(ctx, s, key, func(cur *V) error {
		P(cur).ObjectMeta().RemoveFinalizer(name)
		return nil
	}, opts...)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, fmt.Errorf("informer: Finalize %v: remove finalizer %q: %w", key, name, err)
	}
	return false, nil
}
