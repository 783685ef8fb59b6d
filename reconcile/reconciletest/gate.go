package reconciletest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
)

// gate is the harness's side of a gatedSource: what Settle needs of it,
// whatever its key and value types.
type gate interface {
	// name is the informer's name, for messages.
	name() string
	// storeRevision is the store's current revision.
	storeRevision() informer.Revision
	// caughtUp reports whether the gate has taken every change of its store
	// up to rev: none is on its way from the store to the gate.
	caughtUp(rev informer.Revision) bool
	// oldest returns the receipt time of the oldest change the gate holds,
	// and whether it holds one.
	oldest() (time.Time, bool)
	// release hands the oldest held change to the informer and returns once
	// the informer has applied it and pushed it to its handlers.
	release(ctx context.Context) error
}

// gatedSource is the informer.Source the harness gives each informer in
// place of its memory store. It takes every change from the store as soon
// as it is made (its pump keeps a watch on the store) but holds it until the
// harness releases it, one at a time; between releases the informer sees the
// store as of the last released change. That lets Settle hand each change to
// the controllers only once everything before it has been handled, so that a
// test's call counts do not depend on how goroutines were scheduled.
type gatedSource[K comparable, V any] struct {
	informerName string
	store        *memstore.Store[K, V]
	// handoff carries a released change to the informer's Watch; unbuffered,
	// so a release knows that Watch has taken it.
	handoff chan handoff[K, V]
	// heldNow is called after the pump took a change (it wakes the harness's
	// stall watcher).
	heldNow func()

	mu sync.Mutex
	// Everything below is guarded by mu.

	// received is the revision of the last change the pump took (or of the
	// snapshot the gate started from); known are the keys the store had at
	// it, in the store's order, with their places in knownAt.
	received informer.Revision
	known    []K
	knownAt  map[K]int
	// held are the changes taken and not yet released, in revision order.
	held []heldChange[K, V]
	// released is the revision the informer has been given up to; entries
	// and index are the store as of it, for List.
	released informer.Revision
	entries  []informer.Entry[K, V]
	index    map[K]int
}

type heldChange[K comparable, V any] struct {
	ev informer.Event[K, V]
	at time.Time // real time the pump took it
}

type handoff[K comparable, V any] struct {
	ev   informer.Event[K, V]
	done chan error // buffered 1: emit's result
}

// newGatedSource starts from the store's contents now: an informer created
// on it lists exactly these, and every later write is held for release.
func newGatedSource[K comparable, V any](name string, store *memstore.Store[K, V], heldNow func()) (*gatedSource[K, V], error) {
	entries, rev, err := store.List(context.Background())
	if err != nil {
		return nil, err
	}
	g := &gatedSource[K, V]{
		informerName: name,
		store:        store,
		handoff:      make(chan handoff[K, V]),
		heldNow:      heldNow,
		received:     rev,
		knownAt:      make(map[K]int, len(entries)),
		released:     rev,
		entries:      entries,
		index:        make(map[K]int, len(entries)),
	}
	for i, e := range entries {
		g.index[e.Key] = i
		g.knownAt[e.Key] = i
		g.known = append(g.known, e.Key)
	}
	return g, nil
}

// pump takes every change of the store after the starting snapshot and
// holds it, until ctx is done. It never waits for the informer, so it falls
// behind the store's history only if the writers outrun it by more than the
// store keeps (a short memstore.WithHistory); then it takes the store's
// contents instead.
func (g *gatedSource[K, V]) pump(ctx context.Context) error {
	for {
		g.mu.Lock()
		after := g.received
		g.mu.Unlock()
		err := g.store.Watch(ctx, after, g.take)
		if !errors.Is(err, informer.ErrRevisionExpired) {
			return err
		}
		if err := g.relist(ctx); err != nil {
			return err
		}
	}
}

// take holds one change from the store's watch.
func (g *gatedSource[K, V]) take(ev informer.Event[K, V]) error {
	g.mu.Lock()
	g.held = append(g.held, heldChange[K, V]{ev: ev, at: time.Now()})
	g.received = ev.Revision
	g.track(ev.Type, ev.Key)
	g.mu.Unlock()
	g.heldNow()
	return nil
}

// relist holds, as an informer does after a relist, a put of every key the
// store has now, and a delete of every key it had at the last change taken
// and has no longer, all at the store's current revision: the changes in
// between are gone from its history.
func (g *gatedSource[K, V]) relist(ctx context.Context) error {
	entries, rev, err := g.store.List(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	now := time.Now()
	listed := make(map[K]bool, len(entries))
	for _, e := range entries {
		listed[e.Key] = true
		g.held = append(g.held, heldChange[K, V]{ev: informer.Event[K, V]{Type: informer.Put, Key: e.Key, Value: e.Value, Revision: rev}, at: now})
	}
	for _, k := range g.known {
		if !listed[k] {
			g.held = append(g.held, heldChange[K, V]{ev: informer.Event[K, V]{Type: informer.Delete, Key: k, Revision: rev}, at: now})
		}
	}
	g.known, g.knownAt = g.known[:0], make(map[K]int, len(entries))
	for _, e := range entries {
		g.track(informer.Put, e.Key)
	}
	g.received = rev
	g.mu.Unlock()
	g.heldNow()
	return nil
}

// track keeps known up to date with a change taken. mu must be held.
func (g *gatedSource[K, V]) track(typ informer.EventType, key K) {
	i, ok := g.knownAt[key]
	switch {
	case typ == informer.Put && !ok:
		g.knownAt[key] = len(g.known)
		g.known = append(g.known, key)
	case typ == informer.Delete && ok:
		last := len(g.known) - 1
		g.known[i] = g.known[last]
		g.knownAt[g.known[i]] = i
		g.known = g.known[:last]
		delete(g.knownAt, key)
	}
}

// List returns the store as of the last released change.
func (g *gatedSource[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.entries), g.released, nil
}

// Watch emits the changes the harness releases, as it releases them. It
// can only continue from the last released change: the changes before it
// are gone from the gate, so for any other revision it sends the informer
// back to List.
func (g *gatedSource[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	if after != released {
		return fmt.Errorf("reconciletest: watch after revision %d, but the changes up to %d are released: %w",
			after, released, informer.ErrRevisionExpired)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case h := <-g.handoff:
			g.mu.Lock()
			g.apply(h.ev)
			g.mu.Unlock()
			err := emit(h.ev)
			informer.WaitApplied(ctx)
			h.done <- err
			if err != nil {
				return err
			}
		}
	}
}

// apply records a released change in the List view. mu must be held.
func (g *gatedSource[K, V]) apply(ev informer.Event[K, V]) {
	g.released = ev.Revision
	i, ok := g.index[ev.Key]
	switch {
	case ev.Type == informer.Put && ok:
		g.entries[i].Value = ev.Value
	case ev.Type == informer.Put:
		g.index[ev.Key] = len(g.entries)
		g.entries = append(g.entries, informer.Entry[K, V]{Key: ev.Key, Value: ev.Value})
	case ev.Type == informer.Delete && ok:
		// The last entry takes the deleted one's place, as in the store.
		last := len(g.entries) - 1
		g.entries[i] = g.entries[last]
		g.index[g.entries[i].Key] = i
		g.entries[last] = informer.Entry[K, V]{}
		g.entries = g.entries[:last]
		delete(g.index, ev.Key)
	}
}

func (g *gatedSource[K, V]) name() string { return g.informerName }

func (g *gatedSource[K, V]) storeRevision() informer.Revision { return g.store.Revision() }

func (g *gatedSource[K, V]) caughtUp(rev informer.Revision) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.received >= rev
}

func (g *gatedSource[K, V]) oldest() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return time.Time{}, false
	}
	return g.held[0].at, true
}

// release must not run concurrently with itself (the harness releases
// under one lock), so the change it hands off is still the oldest when it
// drops it.
func (g *gatedSource[K, V]) release(ctx context.Context) error {
	g.mu.Lock()
	if len(g.held) == 0 {
		g.mu.Unlock()
		return nil
	}
	ev := g.held[0].ev
	g.mu.Unlock()

	h := handoff[K, V]{ev: ev, done: make(chan error, 1)}
	select {
	case g.handoff <- h:
	case <-ctx.Done():
		return fmt.Errorf("informer %s did not take the change at revision %d: %w", g.informerName, ev.Revision, context.Cause(ctx))
	}
	g.mu.Lock()
	g.held[0] = heldChange[K, V]{}
	g.held = g.held[1:]
	g.mu.Unlock()
	select {
	case err := <-h.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("informer %s did not apply the change at revision %d: %w", g.informerName, ev.Revision, context.Cause(ctx))
	}
}
