package informer

import (
	"context"
	"fmt"
	"slices"
)

// AddHandler adds a handler, before or during Run. A handler added once
// the cache holds entries is first given every cached entry as an OnAdd
// with initialList true (a replay), then the changes after it; a key that
// changes before the replay reaches it is told as an add of its new value
// instead. It fails with ErrStopped after Run has returned, and on a nil
// handler.
//
// The replay is built on AddHandler's goroutine, which it returns after,
// in chunks between which the informer's lock is released: adding a
// handler to a large cache holds up readers (Get, List) and the watch for
// a chunk at a time, not for the whole replay. Deliveries start with the
// first chunk.
func (inf *Informer[K, V]) AddHandler(h Handler[K, V]) (*Registration[K, V], error) {
	if h == nil {
		return nil, fmt.Errorf("informer %q: AddHandler: nil handler", inf.name)
	}
	l := newListener(h, func(key K, err error) { inf.panicked(err, key, 0, "the change counts as delivered") })
	inf.mu.Lock()
	if inf.state == stopped {
		inf.mu.Unlock()
		return nil, fmt.Errorf("informer %q: AddHandler: %w", inf.name, ErrStopped)
	}
	n := inf.cache.len()
	if n > 0 {
		l.replaying = true // l is not shared yet
	} else if inf.isCached {
		l.markSync() // an empty cache: nothing to replay
	} // else marked when the first list is stored
	inf.listeners = append(inf.listeners, l)
	if inf.state == running {
		inf.startLocked(l)
	}
	inf.mu.Unlock()
	if n > 0 {
		inf.replay(l, n)
	}
	return &Registration[K, V]{inf: inf, l: l}, nil
}

// removeListener stops deliveries to l and waits for a call in progress.
func (inf *Informer[K, V]) removeListener(l *listener[K, V]) {
	inf.mu.Lock()
	inf.listeners = slices.DeleteFunc(inf.listeners, func(x *listener[K, V]) bool { return x == l })
	// Once out of listeners, l cannot be started: Run starts only
	// listeners it finds there, under mu.
	started := l.started
	inf.mu.Unlock()
	l.halt(true)
	if started {
		<-l.exited
	}
}

// notifyLocked pushes a change to every listener. mu must be held for
// writing.
func (inf *Informer[K, V]) notifyLocked(key K, c change[V]) {
	for _, l := range inf.listeners {
		l.push(key, c)
	}
}

// pushAllLocked pushes a change to every listener. mu must be held for
// writing, and every listener's mu too; the caller wakes them.
func (inf *Informer[K, V]) pushAllLocked(key K, c change[V]) {
	for _, l := range inf.listeners {
		l.pushLocked(key, c)
	}
}

// resyncLoop re-delivers the cache every resync period until ctx is done.
func (inf *Informer[K, V]) resyncLoop(ctx context.Context) {
	defer inf.wg.Done()
	t := inf.clock.NewTicker(inf.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			inf.resyncAll()
		}
	}
}

func (inf *Informer[K, V]) resyncAll() {
	// Read lock suffices: it excludes every writer of the cache, so no
	// change can slip between a listener's pending check and its push.
	inf.mu.RLock()
	defer inf.mu.RUnlock()
	for _, l := range inf.listeners {
		for k, it := range inf.cache.all() {
			l.resync(k, it.value, it.rev)
		}
	}
	inf.stats.resyncs.Add(1)
}
