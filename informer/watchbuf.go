package informer

import (
	"context"
	"sync"
)

// The watch's two goroutines.
//
// A Source's Watch calls emit once per change, also when it has many in
// hand (an etcd watch response, a page of a change log, the memory store's
// history). Applying each change under its own hold of the informer's lock
// would cost a lock round, a listener wake-up and a waiter check per
// change, and would make the Source wait for the apply. So emit only
// appends the change to a bounded buffer and wakes the applier, a goroutine
// of the watch's own, which takes everything buffered at once and applies
// it in holds of at most applyBatch changes. Nothing waits to fill a
// batch: an idle applier is woken by the first change, and a burst
// accumulates while it applies the one before.
//
// The buffer holds at most watchBuffer changes, and the applier at most as
// many again; both start empty and grow only as far as the bursts that
// come (append's growth, a few copies of a small slice in all), so an idle
// informer holds no room for changes. When both are full, emit waits for
// the applier, so a slow
// apply (a slow transform or IndexFunc, a contended lock) slows the Source
// instead of growing memory without bound.

// watchBuffer is the most changes emitted and not yet taken by the
// applier: four lock holds' worth.
const watchBuffer = 4 * applyBatch

// watchBuf is the buffer between a watch's emit and its applier.
type watchBuf[K comparable, V any] struct {
	mu sync.Mutex
	// pending are the changes emitted and not taken; ended: the Source's
	// Watch has returned, so nothing more comes. Both guarded by mu.
	pending []Event[K, V]
	ended   bool
	// ready holds a token when pending became non-empty, or ended was
	// set, since the applier last looked; room when the applier has
	// taken pending since emit last found it full. A stale token costs
	// one look.
	ready, room chan struct{}
	// applying: the applier has taken changes and not come back for more;
	// stopped: the applier has returned. Both guarded by mu; idle is
	// broadcast when the applier finds nothing pending, and when it stops.
	applying, stopped bool
	idle              *sync.Cond
}

// watchBufKey is the context key under which the ctx given to a Source's
// Watch carries the watch's buffer, for WaitApplied.
type watchBufKey struct{}

// WaitApplied, called by a Source's Watch with the context the informer
// gave it, waits until every change it has emitted so far has been applied
// to the informer's cache and pushed to its handlers' buffers, or the
// informer has stopped applying them (its Run is returning). emit returns
// before that, as it only buffers the change (see the package's Cost
// section); a Source that must know its changes are in the cache before it
// goes on, such as a test harness stepping an informer one change at a
// time, calls WaitApplied after emit. With any other context it returns at
// once.
func WaitApplied(ctx context.Context) {
	if b, ok := ctx.Value(watchBufKey{}).(interface{ waitApplied() }); ok {
		b.waitApplied()
	}
}

func newWatchBuf[K comparable, V any]() *watchBuf[K, V] {
	// pending, and the applier's spare, start empty and grow with the
	// bursts up to watchBuffer: an informer whose source is quiet holds
	// no room for changes that do not come.
	b := &watchBuf[K, V]{
		ready: make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
	}
	b.idle = sync.NewCond(&b.mu)
	return b
}

// waitApplied waits until every change put so far has been applied, or
// the applier has returned.
func (b *watchBuf[K, V]) waitApplied() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for (len(b.pending) > 0 || b.applying) && !b.stopped {
		b.idle.Wait()
	}
}

// signal leaves a token in c unless one is there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// put appends ev, waiting while the buffer is full. It returns ctx's
// error if ctx is done, so that the Source stops emitting.
func (b *watchBuf[K, V]) put(ctx context.Context, ev Event[K, V]) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.mu.Lock()
		if n := len(b.pending); n < watchBuffer {
			b.pending = append(b.pending, ev)
			b.mu.Unlock()
			if n == 0 {
				signal(b.ready)
			}
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.room:
		case <-ctx.Done():
		}
	}
}

// end says that the Source's Watch has returned: the applier applies what
// is pending and stops.
func (b *watchBuf[K, V]) end() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	signal(b.ready)
}

// take swaps the pending changes for spare, which must be empty, and
// reports whether the Source's Watch has ended. It waits while nothing is
// pending and the watch goes on; it returns nothing if ctx is done first.
func (b *watchBuf[K, V]) take(ctx context.Context, spare []Event[K, V]) (evs []Event[K, V], ended bool) {
	b.mu.Lock()
	b.applying = false
	for len(b.pending) == 0 && !b.ended {
		b.idle.Broadcast()
		b.mu.Unlock()
		select {
		case <-b.ready:
		case <-ctx.Done():
			return spare, false
		}
		b.mu.Lock()
	}
	evs, b.pending = b.pending, spare
	ended, b.applying = b.ended, true
	b.mu.Unlock()
	signal(b.room)
	return evs, ended
}

// stop says that the applier has returned: nothing waits for it any more.
func (b *watchBuf[K, V]) stop() {
	b.mu.Lock()
	b.stopped, b.applying = true, false
	b.idle.Broadcast()
	b.mu.Unlock()
}

// applyFrom applies what the watch w emits into b, in order, until the
// Source's Watch has ended and everything it emitted is applied, or ctx is
// done (then the rest is dropped, as Run is returning). A watch that fails
// after emitting has all it emitted applied before the informer decides
// where to resume, as when each change was applied inside emit.
func (inf *Informer[K, V]) applyFrom(ctx context.Context, b *watchBuf[K, V], w *watchRun[K, V]) {
	defer b.stop()
	var spare []Event[K, V]
	for {
		evs, ended := b.take(ctx, spare)
		for rest := evs; len(rest) > 0 && ctx.Err() == nil; {
			n := min(len(rest), applyBatch)
			inf.applyAll(rest[:n], w)
			rest = rest[n:]
		}
		clear(evs) // let the values go while the applier waits
		spare = evs[:0]
		if ended || ctx.Err() != nil {
			return
		}
	}
}
