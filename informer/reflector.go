package informer

import (
	"context"
	"errors"
	"fmt"
)

// errWatchEnded stands for a Watch that returned nil before its context
// was done, which the Source contract does not allow; it is handled like
// any other watch failure.
var errWatchEnded = errors.New("watch returned without an error")

// reflect lists and watches until ctx is done.
//
// Backoff: attempt counts failures since the last watch that made progress
// (moved the last revision seen forward, or ran for backoffResetAfter). Every failed list and
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
	if inf.cache.len() == 0 {
		inf.fill(entries, rev, first)
	} else {
		inf.relist(entries, rev)
	}
	inf.keepListedBadLocked(entries)
	inf.lastRev, inf.resumeRev = rev, rev
	// After the cache and the handlers' buffers have the list.
	defer inf.wakeWaitersLocked()
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
			r := listedRev(e, rev)
			v, ok := inf.takeLocked(e.Key, e.Value, e.Err, r, e.Revision == 0)
			if !ok {
				continue
			}
			old, existed, err := inf.cache.set(e.Key, v, r)
			if err != nil {
				// Never seen, so never told: as if it had not been listed.
				inf.panicked(err, e.Key, rev, "entry not cached")
				continue
			}
			inf.clearBadLocked(e.Key)
			c := change[V]{kind: kindAdd, cur: v, initialList: initialList, rev: rev}
			if existed {
				// A source listed the key twice: the later value wins.
				c = change[V]{kind: kindUpdate, old: old, cur: v, rev: rev}
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
	for i, l := range inf.listeners {
		if bulk[i] {
			l.mu.Lock()
			l.endBulkLocked()
			l.mu.Unlock()
		}
	}
}

// relist replaces a non-empty cache with entries and tells the handlers
// the difference.
func (inf *Informer[K, V]) relist(entries []Entry[K, V], rev Revision) {
	listed := make(map[K]struct{}, len(entries))
	for _, e := range entries {
		// Listed, so not deleted, even if its value cannot be taken.
		listed[e.Key] = struct{}{}
		r := listedRev(e, rev)
		v, ok := inf.takeLocked(e.Key, e.Value, e.Err, r, e.Revision == 0)
		if !ok {
			continue
		}
		old, existed, err := inf.cache.set(e.Key, v, r)
		switch {
		case err != nil:
			inf.cache.setRev(e.Key, r)
			inf.panicked(err, e.Key, rev, "entry skipped: the cache keeps the key's last value, if any")
		case existed:
			inf.clearBadLocked(e.Key)
			inf.notifyLocked(e.Key, change[V]{kind: kindUpdate, old: old, cur: v, resync: true, rev: rev})
		default:
			inf.clearBadLocked(e.Key)
			inf.notifyLocked(e.Key, change[V]{kind: kindAdd, cur: v, rev: rev})
		}
	}
	// A revision mark instead of the listed set would save a map, but a
	// store that restarted can hand out a revision again, and a vanished
	// key that happened to carry it would then survive.
	for k := range inf.cache.all() {
		if _, ok := listed[k]; !ok {
			last, _, err := inf.cache.remove(k)
			if err != nil {
				inf.panicked(err, k, rev, "deleted anyway, and removed from every index by a scan")
			}
			inf.notifyLocked(k, change[V]{kind: kindDelete, old: last, cur: last, rev: rev})
		}
	}
}

// watch watches the source after the last complete revision, until it
// fails, applying what it emits on a goroutine of its own (watchbuf.go),
// which has returned when watch does. It reports whether the watch made
// progress, for the backoff: that is, whether it moved the last revision
// seen forward (events re-sent after a resume do not count, or a watch
// that fails after replaying them would retry without backing off).
func (inf *Informer[K, V]) watch(ctx context.Context) (progressed bool, err error) {
	inf.mu.RLock()
	after := inf.resumeRev
	inf.mu.RUnlock()
	start := inf.clock.Now()
	w := watchRun[K, V]{after: after}
	b := newWatchBuf[K, V]()
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		inf.applyFrom(ctx, b, &w)
	}()
	wctx := context.WithValue(ctx, watchBufKey{}, b)
	err = inf.src.Watch(wctx, after, func(ev Event[K, V]) error { return b.put(ctx, ev) })
	b.end()
	<-applied // w is the watch's own again
	if w.violations > 1 {
		inf.log.Warn("source broke the revision contract; events skipped", "count", w.violations, "watch_after", after)
	}
	if err == nil {
		err = errWatchEnded
	}
	return w.progressed || inf.clock.Since(start) >= backoffResetAfter,
		fmt.Errorf("informer %q: watch after revision %d: %w", inf.name, after, err)
}

// applyBatch is the most watch events applied per hold of the informer's
// lock: about 50 µs of work, which readers (Get, List) may wait for.
const applyBatch = 256

// watchRun is what one watch has done so far.
type watchRun[K comparable, V any] struct {
	// after is the revision the watch started after.
	after Revision
	// progressed: an event moved the last revision seen forward.
	progressed bool
	// violations counts events that broke the Source contract; the first
	// is logged on its own.
	violations uint64
}

// applyAll applies events of watch w, in order, to the cache and the
// handlers' buffers, under one hold of the informer's lock and of each
// listener's: a listener's dispatcher takes none of them until all are
// pushed, so changes to one key within them coalesce. Waiters for the
// revisions reached are woken once all are applied and pushed.
func (inf *Informer[K, V]) applyAll(evs []Event[K, V], w *watchRun[K, V]) {
	var violation string
	var bad Event[K, V]
	inf.mu.Lock()
	for _, l := range inf.listeners {
		l.mu.Lock()
	}
	advanced, applied, violations := false, uint64(0), uint64(0)
	for _, ev := range evs {
		adv, ok, v := inf.applyLocked(ev, w.after)
		advanced = advanced || adv
		if ok {
			applied++
		}
		if v != "" {
			if w.violations == 0 && violation == "" {
				violation, bad = v, ev
			}
			violations++
		}
	}
	for _, l := range inf.listeners {
		l.mu.Unlock()
		l.wake()
	}
	// Counted before the waiters are woken: one that reads Stats sees
	// the changes it waited for.
	inf.stats.events.Add(applied)
	if violations > 0 {
		inf.stats.violations.Add(violations)
		w.violations += violations
	}
	if advanced {
		// With mu still held, and every listener's lock released:
		// a Registration.AfterRevision waiter takes its listener's.
		inf.wakeWaitersLocked()
	}
	inf.mu.Unlock()
	if advanced {
		w.progressed = true
		inf.eventApplied()
	}
	if violation != "" { // the watch's first; one line per watch, as a broken source can send many
		inf.log.Warn("source broke the revision contract; event skipped", "violation", violation,
			"type", bad.Type, "key", bad.Key, "revision", bad.Revision, "watch_after", w.after)
	}
}

// applyLocked applies one event of a watch that started after after to the
// cache and pushes it to the handlers' buffers. inf.mu and every
// listener's mu must be held. It reports whether the event moved the last
// revision seen forward, whether it changed the cache, and why it broke the
// Source contract, if it did (see Stats.Violations).
func (inf *Informer[K, V]) applyLocked(ev Event[K, V], after Revision) (advanced, changed bool, violation string) {
	if ev.Revision > inf.lastRev {
		inf.resumeRev, inf.lastRev = inf.lastRev, ev.Revision
		advanced = true
	}
	it, ok := inf.cache.get(ev.Key)
	known := it.rev // the revision the informer holds for the key, if ok
	if len(inf.bad) > 0 && !ok {
		// A bad key without a value has a revision all the same.
		var b BadKey[K]
		if b, ok = inf.bad[ev.Key]; ok {
			known = b.Revision
		}
	}
	switch ev.Type {
	case Put:
		switch {
		case ok && ev.Revision == known:
			return advanced, false, "" // a duplicate, which the contract allows
		case ok && ev.Revision < known:
			return advanced, false, fmt.Sprintf("a Put older than the key's cached revision %d", known)
		case ev.Revision <= after:
			return advanced, false, "a Put at or below the revision the watch started after"
		}
		v, taken := inf.takeLocked(ev.Key, ev.Value, ev.Err, ev.Revision, false)
		if !taken {
			// No handler call: there is no new value to give (see BadKey).
			return advanced, true, ""
		}
		old, existed, err := inf.cache.set(ev.Key, v, ev.Revision)
		if err != nil {
			inf.panicked(err, ev.Key, ev.Revision, "event skipped: the cache keeps the key's last value, if any")
			return advanced, false, ""
		}
		inf.clearBadLocked(ev.Key)
		if existed {
			inf.pushAllLocked(ev.Key, change[V]{kind: kindUpdate, old: old, cur: v, rev: ev.Revision})
		} else {
			inf.pushAllLocked(ev.Key, change[V]{kind: kindAdd, cur: v, rev: ev.Revision})
		}
	case Delete:
		switch {
		case ok && ev.Revision <= known:
			return advanced, false, fmt.Sprintf("a Delete at or below the key's cached revision %d", known)
		case !ok && ev.Revision == after:
			return advanced, false, "" // gone already: a re-sent delete
		case ev.Revision <= after:
			return advanced, false, "a Delete at or below the revision the watch started after"
		case !ok:
			return advanced, false, "" // gone already: a duplicate
		}
		inf.clearBadLocked(ev.Key)
		last, existed, err := inf.cache.remove(ev.Key)
		if err != nil {
			inf.panicked(err, ev.Key, ev.Revision, "deleted anyway, and removed from every index by a scan")
		}
		if existed { // else a bad key that never had a value, which no handler was told of
			inf.pushAllLocked(ev.Key, change[V]{kind: kindDelete, old: last, cur: last, rev: ev.Revision})
		}
	case Bookmark:
		// Every revision up to the bookmark's is complete. One below the
		// last seen (etcd can send those) says nothing of the last.
		inf.resumeRev = max(inf.resumeRev, ev.Revision)
		return advanced, false, ""
	default:
		inf.log.Warn("ignoring watch event of unknown type", "type", ev.Type, "revision", ev.Revision)
		return advanced, false, ""
	}
	return advanced, true, ""
}

// ingest applies the transform, if any, and returns a panic in it as an
// error.
func (inf *Informer[K, V]) ingest(v V) (out V, err error) {
	if inf.transform == nil {
		return v, nil
	}
	err = protect("transform", func() { out = inf.transform(v) })
	return out, err
}
