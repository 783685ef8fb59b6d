package informer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// errWatchEnded stands for a Watch that returned nil before its context
// was done, which the Source contract does not allow; it is handled like
// any other watch failure.
var errWatchEnded = errors.New("watch returned without an error")

// Stats counts what an informer's reflector has done since New.
type Stats struct {
	// Lists counts successful lists; the first fills the cache, the rest
	// are relists after an expired revision.
	Lists uint64
	// ListErrors counts failed lists.
	ListErrors uint64
	// WatchErrors counts watches that failed, other than by expiry.
	WatchErrors uint64
	// Expired counts watches that failed with ErrRevisionExpired.
	Expired uint64
	// Events counts watch events applied (duplicates skipped excluded).
	Events uint64
	// Resyncs counts resync periods that fired.
	Resyncs uint64
}

type stats struct {
	lists, listErrors, watchErrors, expired, events, resyncs atomic.Uint64
}

// Stats returns the reflector's counters.
func (inf *Informer[K, V]) Stats() Stats {
	return Stats{
		Lists:       inf.stats.lists.Load(),
		ListErrors:  inf.stats.listErrors.Load(),
		WatchErrors: inf.stats.watchErrors.Load(),
		Expired:     inf.stats.expired.Load(),
		Events:      inf.stats.events.Load(),
		Resyncs:     inf.stats.resyncs.Load(),
	}
}

// reflect lists and watches until ctx is done.
//
// Backoff: attempt counts failures since the last watch that made progress
// (delivered an event, or ran for backoffResetAfter). Every failed list and
// failed watch waits backoff.Delay(attempt) before the next try. An expired
// revision relists at once if the watch before it made progress, so that a
// compaction costs no delay, and otherwise waits too, so that a source that
// expires every watch cannot spin the informer.
func (inf *Informer[K, V]) reflect(ctx context.Context) {
	attempt := 0
	needList := true
	for ctx.Err() == nil {
		if needList {
			if err := inf.list(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				inf.stats.listErrors.Add(1)
				inf.log.Warn("list failed", "error", err, "attempt", attempt)
				if !inf.sleep(ctx, attempt) {
					return
				}
				attempt++
				continue
			}
			needList = false
		}
		progressed, err := inf.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			attempt = 0
		}
		if errors.Is(err, ErrRevisionExpired) {
			inf.stats.expired.Add(1)
			inf.log.Info("revision expired; listing again", "error", err)
			needList = true
			if attempt > 0 && !inf.sleep(ctx, attempt-1) {
				return
			}
			attempt++
			continue
		}
		inf.stats.watchErrors.Add(1)
		inf.log.Warn("watch failed; resuming", "error", err, "attempt", attempt)
		if !inf.sleep(ctx, attempt) {
			return
		}
		attempt++
	}
}

// sleep waits for the backoff of attempt, and reports false if ctx was done
// first.
func (inf *Informer[K, V]) sleep(ctx context.Context, attempt int) bool {
	t := inf.clock.NewTimer(inf.backoff.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// list lists the source and replaces the cache with the result.
func (inf *Informer[K, V]) list(ctx context.Context) error {
	entries, rev, err := inf.src.List(ctx)
	if err != nil {
		return fmt.Errorf("informer %q: list: %w", inf.name, err)
	}
	inf.replace(entries, rev)
	inf.stats.lists.Add(1)
	return nil
}

// replace makes the cache hold exactly entries, as of rev, and tells the
// handlers the difference: adds for new keys (initialList on the first
// list), updates for keys still present, and deletes, carrying the last
// known value, for keys that vanished.
func (inf *Informer[K, V]) replace(entries []Entry[K, V], rev Revision) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	first := !inf.isCached
	if len(inf.cache.items) == 0 {
		inf.fill(entries, rev, first)
	} else {
		inf.relist(entries, rev)
	}
	inf.lastRev, inf.resumeRev = rev, rev
	if first {
		inf.isCached = true
		inf.syncListeners = append([]*listener[K, V](nil), inf.listeners...)
		for _, l := range inf.syncListeners {
			l.markSync()
		}
		close(inf.cacheSynced)
	}
}

// fillChunk is how many keys fill pushes to a handler's buffer per lock
// hold: large enough that the lock is not contended per key, small enough
// that the handler's dispatcher starts on the first keys while the rest are
// still being cached.
const fillChunk = 1024

// fill puts entries into the empty cache: all adds, no sweep for vanished
// keys. It is the initial list's path, and the one that has to be fast.
func (inf *Informer[K, V]) fill(entries []Entry[K, V], rev Revision, initialList bool) {
	inf.cache.grow(len(entries))
	bulk := make([]bool, len(inf.listeners)) // whether listener i fills its bulk
	for i, l := range inf.listeners {
		l.mu.Lock()
		bulk[i] = l.startBulkLocked(len(entries))
		l.mu.Unlock()
	}
	for start := 0; start < len(entries); start += fillChunk {
		chunk := entries[start:min(start+fillChunk, len(entries))]
		for _, l := range inf.listeners {
			l.mu.Lock()
		}
		for _, e := range chunk {
			v := inf.ingest(e.Value)
			c := change[V]{kind: kindAdd, cur: v, initialList: initialList}
			if old, existed := inf.cache.set(e.Key, v, rev); existed {
				// A source listed the key twice: the later value wins.
				c = change[V]{kind: kindUpdate, old: old, cur: v}
			}
			for i, l := range inf.listeners {
				if bulk[i] {
					l.pushBulkLocked(e.Key, c)
				} else {
					l.pushLocked(e.Key, c)
				}
			}
		}
		for _, l := range inf.listeners {
			l.mu.Unlock()
			l.wake()
		}
	}
}

// relist replaces a non-empty cache with entries and tells the handlers
// the difference.
func (inf *Informer[K, V]) relist(entries []Entry[K, V], rev Revision) {
	listed := make(map[K]struct{}, len(entries))
	for _, e := range entries {
		listed[e.Key] = struct{}{}
		v := inf.ingest(e.Value)
		if old, existed := inf.cache.set(e.Key, v, rev); existed {
			inf.notifyLocked(e.Key, change[V]{kind: kindUpdate, old: old, cur: v, resync: true})
		} else {
			inf.notifyLocked(e.Key, change[V]{kind: kindAdd, cur: v})
		}
	}
	// A revision mark instead of the listed set would save a map, but a
	// store that restarted can hand out a revision again, and a vanished
	// key that happened to carry it would then survive.
	for k := range inf.cache.items {
		if _, ok := listed[k]; !ok {
			last, _ := inf.cache.remove(k)
			inf.notifyLocked(k, change[V]{kind: kindDelete, old: last, cur: last})
		}
	}
}

// watch watches the source after the last complete revision, until it
// fails. It reports whether the watch made progress, for the backoff.
func (inf *Informer[K, V]) watch(ctx context.Context) (progressed bool, err error) {
	inf.mu.RLock()
	after := inf.resumeRev
	inf.mu.RUnlock()
	start := inf.clock.Now()
	emitted := false
	err = inf.src.Watch(ctx, after, func(ev Event[K, V]) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		emitted = true
		inf.apply(ev)
		return nil
	})
	if err == nil {
		err = errWatchEnded
	}
	return emitted || inf.clock.Since(start) >= backoffResetAfter,
		fmt.Errorf("informer %q: watch after revision %d: %w", inf.name, after, err)
}

// apply applies one watch event to the cache and tells the handlers.
func (inf *Informer[K, V]) apply(ev Event[K, V]) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if ev.Revision > inf.lastRev {
		inf.resumeRev, inf.lastRev = inf.lastRev, ev.Revision
	}
	it, ok := inf.cache.get(ev.Key)
	switch ev.Type {
	case Put:
		if ok && ev.Revision <= it.rev {
			return // a duplicate, which the contract allows
		}
		v := inf.ingest(ev.Value)
		inf.cache.set(ev.Key, v, ev.Revision)
		if ok {
			inf.notifyLocked(ev.Key, change[V]{kind: kindUpdate, old: it.value, cur: v})
		} else {
			inf.notifyLocked(ev.Key, change[V]{kind: kindAdd, cur: v})
		}
	case Delete:
		if !ok || ev.Revision <= it.rev {
			return // gone already, or a stale duplicate
		}
		inf.cache.remove(ev.Key)
		inf.notifyLocked(ev.Key, change[V]{kind: kindDelete, old: it.value, cur: it.value})
	case Bookmark:
		inf.resumeRev = inf.lastRev
		return
	default:
		inf.log.Warn("ignoring watch event of unknown type", "type", ev.Type, "revision", ev.Revision)
		return
	}
	inf.stats.events.Add(1)
}

// ingest applies the transform, if any.
func (inf *Informer[K, V]) ingest(v V) V {
	if inf.transform != nil {
		return inf.transform(v)
	}
	return v
}
