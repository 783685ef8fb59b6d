package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/informer"
)

// podTracker follows every pod through one watch and notes when the
// wanted number of them were first created, bound, and Running and Ready.
type podTracker struct {
	want int
	done chan struct{}

	mu                      sync.Mutex
	t0                      time.Time
	pods                    map[string]podState
	bound, running          int
	created, boundAt, ranAt time.Duration
	binds, others           int
}

type podState struct{ bound, running bool }

func newPodTracker(want int) *podTracker {
	return &podTracker{want: want, done: make(chan struct{}), pods: map[string]podState{}}
}

// since sets the moment the times are counted from.
func (t *podTracker) since(t0 time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = t0
}

// follow lists the pods, then watches them until ctx is done; the
// returned channel gets the watch's end if it ends before.
func (t *podTracker) follow(ctx context.Context, src informer.Source[string, api.Pod]) (<-chan error, error) {
	entries, rev, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Err == nil {
			t.set(e.Key, &e.Value, false)
		}
	}
	errc := make(chan error, 1)
	go func() {
		errc <- src.Watch(ctx, rev, func(ev informer.Event[string, api.Pod]) error {
			switch {
			case ev.Type == informer.Delete:
				t.set(ev.Key, nil, true)
			case ev.Type == informer.Put && ev.Err == nil:
				t.set(ev.Key, &ev.Value, true)
			}
			return nil
		})
	}()
	return errc, nil
}

// set notes key's new value (nil: deleted); counted says whether it is a
// write to count as a bind or another update.
func (t *podTracker) set(key string, p *api.Pod, counted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.pods[key]
	if had {
		t.bound -= b2i(old.bound)
		t.running -= b2i(old.running)
		delete(t.pods, key)
	}
	if p == nil {
		return
	}
	s := podState{bound: p.Spec.NodeName != "", running: podRunsReady(p)}
	if had && counted {
		if s.bound && !old.bound {
			t.binds++
		} else {
			t.others++
		}
	}
	t.pods[key] = s
	t.bound += b2i(s.bound)
	t.running += b2i(s.running)
	if t.t0.IsZero() {
		return
	}
	for _, m := range []struct {
		n  int
		at *time.Duration
	}{{len(t.pods), &t.created}, {t.bound, &t.boundAt}, {t.running, &t.ranAt}} {
		if m.n >= t.want && *m.at == 0 {
			*m.at = time.Since(t.t0)
			if m.at == &t.ranAt {
				close(t.done)
			}
		}
	}
}

// podRunsReady reports whether p is Running, Ready, and each of its
// containers running.
func podRunsReady(p *api.Pod) bool {
	if p.Status.Phase != api.PodRunning || !p.IsReady() || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// times returns when the wanted number of pods were created, bound and
// running.
func (t *podTracker) times() (created, bound, running time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created, t.boundAt, t.ranAt
}

// updates returns the binds and the other pod updates the watch saw.
func (t *podTracker) updates() (binds, others int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.binds, t.others
}

func (t *podTracker) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d pods, %d bound, %d Running", len(t.pods), t.bound, t.running)
}
