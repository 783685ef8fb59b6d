package simtest

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// gate serialises a run (hook H5 of the design, inside the kit): every
// event a wrapped store's watch sends an informer, and every reconcile a
// Count-wrapped reconciler starts, waits at the gate until the driver lets
// it through, one at a time, each only once everything the one before it
// set going has settled (synctest.Wait), and always the waiting one that
// sorts first. Which of two informers is sent its event first, or which of
// two controllers reconciles first, is then the kit's choice, the same in
// every rerun, instead of the Go scheduler's.
//
// What the gate cannot order is what happens between its passes at one
// instant of virtual time without passing it: two timers of one process
// firing together, say. So a seed replays the same writes in practice, not
// by proof; the report still counts reproductions.
type gate struct {
	mu sync.Mutex
	// waiting are the passes not yet let through; guarded by mu.
	waiting []*pass
	// arrived has room for one signal: a pass is waiting. The driver
	// selects on it, so that virtual time cannot move on while a pass
	// waits (the driver is runnable until it has let it through).
	arrived chan struct{}
}

type pass struct {
	order string // what sorts first goes first
	go_   chan struct{}
}

func newGate() *gate { return &gate{arrived: make(chan struct{}, 1)} }

// wait blocks until the driver lets the pass named order through, or ctx
// is done (its process ended), which it returns.
func (g *gate) wait(ctx context.Context, order string) error {
	p := &pass{order: order, go_: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, p)
	g.mu.Unlock()
	select {
	case g.arrived <- struct{}{}:
	default:
	}
	select {
	case <-p.go_:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if i := slices.Index(g.waiting, p); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
			return ctx.Err()
		}
		return nil // let through meanwhile: go on
	}
}

// next lets the first waiting pass through, and reports whether there was
// one. Call it only once everything else is blocked (synctest.Wait).
func (g *gate) next() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		return false
	}
	i := 0
	for j, p := range g.waiting {
		if strings.Compare(p.order, g.waiting[i].order) < 0 {
			i = j
		}
	}
	p := g.waiting[i]
	g.waiting = slices.Delete(g.waiting, i, i+1)
	close(p.go_)
	return true
}
