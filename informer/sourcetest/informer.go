package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
)

// AnInformerConverges: an informer over the Source, random writes while it
// runs, and, if the Backend can Expire, writes while its watch is held back
// followed by Expire, so that it resumes from an expired revision and
// relists. Within Wait, its cache and a handler's view equal the store;
// every value a handler is given (deletes' included) is one written to the
// key, never older than the one it was given before; if the Backend can
// Expire, the informer relisted.
func testAnInformerConverges[K comparable, V any](t *testing.T, s Suite[K, V]) {
	const keys, opsPerPhase = 12, 40
	b := s.newBackend(t)
	src := &pausable[K, V]{Source: b.Source}
	h := &checkingHandler[K, V]{s: s, history: map[K][]int{}, view: map[K]V{}}

	rng := rand.New(rand.NewPCG(4, 5))
	model := map[K]V{}
	next := 1
	write := func(n int) {
		for range n {
			k := s.Key(rng.IntN(keys))
			if _, ok := model[k]; ok && rng.IntN(4) == 0 {
				del(t, b, k)
				delete(model, k)
				continue
			}
			h.written(k, next) // before the Put: the informer may see it at once
			put(t, b, k, s.Value(next))
			model[k] = s.Value(next)
			next++
		}
	}
	write(keys)

	inf := runInformer(t, s.Wait, informer.Source[K, V](src), h, "WaitForSync")

	write(opsPerPhase)
	if b.Expire != nil {
		src.pause()
		write(opsPerPhase)
		require.NoError(t, b.Expire(t.Context()), "Expire")
		src.resume()
	}
	write(opsPerPhase)

	converged := func() bool {
		cached, err := toMap(inf.List())
		return err == nil && same(cached, model) && same(h.snapshot(), model)
	}
	// The informer runs on its own goroutines and the real clock, so this
	// is the one wait of the suite that polls.
	ok := eventually(s.Wait, 2*time.Millisecond, converged)
	cached, _ := toMap(inf.List())
	assert.True(t, ok, "within %v: the informer's cache is %v and its handler's view %v; want the store's %v (stats %+v)",
		s.Wait, cached, h.snapshot(), model, inf.Stats())
	listed, _ := list(t, b.Source)
	assert.Equal(t, model, listed, "List after the writes")
	if b.Expire != nil {
		assert.NotZero(t, inf.Stats().Expired, "the watch resumed after Expire did not expire")
	}
	for _, err := range h.failures() {
		t.Error(err)
	}
}

// runInformer starts an informer over src with h as its handler and waits,
// up to wait, for it to sync (what names the wait in a failure). When the
// test ends, the informer is stopped and must return nil within wait.
func runInformer[K comparable, V any](t *testing.T, wait time.Duration, src informer.Source[K, V], h informer.Handler[K, V], what string) *informer.Informer[K, V] {
	t.Helper()
	inf, err := informer.New("sourcetest", src, informer.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	_, err = inf.AddHandler(h)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- inf.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ran:
			assert.NoError(t, err, "informer.Run")
		case <-time.After(wait):
			t.Errorf("informer.Run did not return within %v of its context's cancellation", wait)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, wait)
	defer syncCancel()
	require.NoError(t, inf.WaitForSync(syncCtx), what)
	return inf
}

// eventually reports whether cond holds within wait, checking it every
// tick.
func eventually(wait, tick time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-ticker.C:
		}
	}
}

// checkingHandler keeps a view of what it is told, and checks each value
// against the key's history of written values.
type checkingHandler[K comparable, V any] struct {
	s  Suite[K, V]
	mu sync.Mutex
	// history holds, per key, the value indices Put to it, in order.
	history map[K][]int
	// given is, per key, the position in history of the value last given.
	given map[K]int
	view  map[K]V
	errs  []error
}

// written records that key is about to be set to Value(vi).
func (h *checkingHandler[K, V]) written(key K, vi int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history[key] = append(h.history[key], vi)
}

// check records a failure unless v was written to key, no earlier than the
// value given before. h.mu must be held.
func (h *checkingHandler[K, V]) check(what string, key K, v V) {
	if h.given == nil {
		h.given = map[K]int{}
	}
	hist := h.history[key]
	for pos := len(hist) - 1; pos >= 0; pos-- {
		if !same(v, h.s.Value(hist[pos])) {
			continue
		}
		if prev, ok := h.given[key]; ok && pos < prev {
			h.errs = append(h.errs, fmt.Errorf("%s %v: Value(%d) is older than Value(%d), given before", what, key, hist[pos], hist[prev]))
		}
		h.given[key] = pos
		return
	}
	h.errs = append(h.errs, fmt.Errorf("%s %v: %v was never written to the key (written: %v)", what, key, v, hist))
}

func (h *checkingHandler[K, V]) OnAdd(key K, v V, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.check("OnAdd", key, v)
	h.view[key] = v
}

func (h *checkingHandler[K, V]) OnUpdate(key K, _, v V, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.check("OnUpdate", key, v)
	h.view[key] = v
}

func (h *checkingHandler[K, V]) OnDelete(key K, last V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.check("OnDelete", key, last)
	delete(h.view, key)
}

func (h *checkingHandler[K, V]) snapshot() map[K]V {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[K]V, len(h.view))
	for k, v := range h.view {
		m[k] = v
	}
	return m
}

func (h *checkingHandler[K, V]) failures() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

// errPaused ends the watches of a paused pausable.
var errPaused = errors.New("sourcetest: watch paused by the test")

// pausable is a Source whose watches the test can hold back, the way a
// network partition or a stopped process does: pause ends the running
// watches (the informer sees an error and retries), and a Watch called
// while paused waits for resume before it starts. List is not affected.
type pausable[K comparable, V any] struct {
	informer.Source[K, V]

	// mu is held while an event is handed on, so that once pause has
	// returned no event of a watch from before it reaches the informer.
	mu      sync.Mutex
	paused  bool
	resumed chan struct{} // closed by resume
	cancels map[int]context.CancelFunc
	nextID  int
}

func (p *pausable[K, V]) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused, p.resumed = true, make(chan struct{})
	for _, cancel := range p.cancels {
		cancel()
	}
}

func (p *pausable[K, V]) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	close(p.resumed)
}

func (p *pausable[K, V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[K, V]) error) error {
	p.mu.Lock()
	for p.paused {
		resumed := p.resumed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-resumed:
		}
		p.mu.Lock()
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id := p.nextID
	p.nextID++
	if p.cancels == nil {
		p.cancels = map[int]context.CancelFunc{}
	}
	p.cancels[id] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.cancels, id)
		p.mu.Unlock()
	}()

	err := p.Source.Watch(wctx, after, func(e informer.Event[K, V]) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.paused {
			return errPaused
		}
		return emit(e)
	})
	if ctx.Err() == nil && wctx.Err() != nil {
		return errPaused
	}
	return err
}
