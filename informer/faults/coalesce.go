package faults

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// coalescing is Watch with Rates.Coalesce: the wrapped watch, faults
// included, runs on a goroutine of its own and hands its events over, so
// that a window can close on the clock while no event comes; emit still
// runs only on the caller's goroutine, as the contract says.
//
// Emitting per key only the latest event of a window, in revision order,
// stays within the Source contract: no key goes back, and a watch that
// ends with events held loses nothing, because the informer resumes after
// the last revision it was given and so is sent the held ones again.
func (s *Source[K, V]) coalescing(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	ctx, cancel := context.WithCancel(ctx)
	evs := make(chan informer.Event[K, V])
	var (
		wg       sync.WaitGroup
		innerErr error
	)
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		innerErr = s.watch(ctx, after, func(ev informer.Event[K, V]) error {
			select {
			case evs <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	// The goroutine is gone before Watch returns: no leak, and no send
	// to a channel nobody reads.
	defer wg.Wait()
	defer cancel()

	var w window[K, V]
	for {
		var closes <-chan time.Time
		if w.timer != nil {
			closes = w.timer.C()
		}
		select {
		case ev := <-evs:
			switch {
			case w.timer != nil:
				w.add(ev, &s.counts.coalesced)
			case s.roll(s.rates.Coalesce):
				w.timer = s.clock.NewTimer(s.rates.CoalesceWindow)
				w.add(ev, &s.counts.coalesced)
			default:
				if err := emit(ev); err != nil {
					return err
				}
			}
		case <-closes:
			if err := w.flush(emit); err != nil {
				return err
			}
		case <-done:
			// The inner watch sent everything it had before it ended.
			if err := ctx.Err(); err != nil {
				return err
			}
			if w.timer != nil {
				w.timer.Stop()
				if err := w.flush(emit); err != nil {
					return err
				}
			}
			return innerErr
		}
	}
}

// window holds the events of one coalescing window, in arrival (so
// revision) order; a key's earlier event is dropped when a later one
// comes. A bookmark stands for the key-less "latest bookmark".
type window[K comparable, V any] struct {
	timer  clock.Timer // nil while no window is open
	events []informer.Event[K, V]
	live   []bool
	at     map[K]int // key → index of its latest event
	// bookmark is the index of the latest bookmark, if hasBookmark.
	bookmark    int
	hasBookmark bool
}

func (w *window[K, V]) add(ev informer.Event[K, V], dropped *atomic.Uint64) {
	if w.at == nil {
		w.at = map[K]int{}
	}
	i := len(w.events)
	w.events, w.live = append(w.events, ev), append(w.live, true)
	var (
		prev int
		ok   bool
	)
	if ev.Type == informer.Bookmark {
		prev, ok = w.bookmark, w.hasBookmark
		w.bookmark, w.hasBookmark = i, true
	} else {
		prev, ok = w.at[ev.Key]
		w.at[ev.Key] = i
	}
	if ok {
		w.live[prev] = false
		dropped.Add(1)
	}
}

// flush emits the window's live events and closes it.
func (w *window[K, V]) flush(emit func(informer.Event[K, V]) error) error {
	events, live := w.events, w.live
	*w = window[K, V]{}
	for i, ev := range events {
		if live[i] {
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
	return nil
}
