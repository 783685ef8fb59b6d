package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// arrivals are when a watch delivered each key's creation and deletion:
// closer to when they were written than a poll can tell, and in order.
type arrivals struct {
	mu      sync.Mutex
	created map[string]time.Time
	deleted map[string]time.Time
	stop    context.CancelFunc
	done    chan struct{}
}

// watchArrivals lists st, then watches it from that list in the background
// until stop, recording the arrival of keep's keys' creations (keys not in
// the list) and deletions. Keys are store keys ("namespace/name").
func watchArrivals[V any](ctx context.Context, st informer.Store[string, V], keep func(V) bool) (*arrivals, error) {
	entries, rev, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, e := range entries {
		if e.Err == nil && keep(e.Value) {
			known[e.Key] = true
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &arrivals{created: map[string]time.Time{}, deleted: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		_ = st.Watch(ctx, rev, func(ev informer.Event[string, V]) error {
			now := time.Now()
			a.mu.Lock()
			defer a.mu.Unlock()
			switch {
			case ev.Type == informer.Put && ev.Err == nil && !known[ev.Key] && keep(ev.Value):
				known[ev.Key] = true
				a.created[ev.Key] = now
			case ev.Type == informer.Delete && known[ev.Key]:
				if _, ok := a.deleted[ev.Key]; !ok {
					a.deleted[ev.Key] = now
				}
			}
			return nil
		})
	}()
	return a, nil
}

// close ends the watch and waits for it.
func (a *arrivals) close() {
	a.stop()
	<-a.done
}

// counts returns how many creations and deletions arrived so far.
func (a *arrivals) counts() (created, deleted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.created), len(a.deleted)
}

// createdTimes returns the creations' arrival times, in order.
func (a *arrivals) createdTimes() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ts []time.Time
	for _, t := range a.created {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
	return ts
}

// deletedSpan returns the first and last arrival of the deletions of the
// named pods (keys in the default namespace), and how many arrived.
func (a *arrivals) deletedSpan(names []string) (first, last time.Time, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range names {
		t, ok := a.deleted[api.Key(api.DefaultNamespace, name)]
		if !ok {
			continue
		}
		n++
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last, n
}
