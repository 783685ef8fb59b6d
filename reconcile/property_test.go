package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// behaviour is what reconciling a value does; values encode it, so the
// store's writes decide the outcomes.
type behaviour int

const (
	succeed behaviour = iota
	fail              // an error, every time, while the store holds this value
	panics            // a panic, every time
	requeue           // RequeueAfter a second
	terminal
	behaviours
)

// value is what the property test stores: a write number (unique per
// write, so "the last write was reconciled" is checkable) and a behaviour.
type value struct {
	write int
	does  behaviour
}

// limiterLog records the calls the controller makes to its rate limiter.
type limiterLog struct {
	inner backoff.Limiter[string]
	mu    sync.Mutex
	calls map[string][]string // "when <delay>" or "forget"
}

func (l *limiterLog) When(k string) time.Duration {
	d := l.inner.When(k)
	l.mu.Lock()
	l.calls[k] = append(l.calls[k], fmt.Sprint("when ", d))
	l.mu.Unlock()
	return d
}

func (l *limiterLog) Forget(k string) {
	l.inner.Forget(k)
	l.mu.Lock()
	l.calls[k] = append(l.calls[k], "forget")
	l.mu.Unlock()
}

func (l *limiterLog) NumRequeues(k string) int { return l.inner.NumRequeues(k) }

// TestControllerPropertiesUnderRandomWritesAndFailures drives random store
// writes (whose values decide the reconcile's outcome: success, error, panic,
// requeue, terminal error), deletes and clock steps through a controller,
// and checks after every step and at the end:
//   - never two concurrent reconciles of one key;
//   - every key's last write is reconciled once the failures stop;
//   - every failure asks the limiter for a delay, which doubles per
//     consecutive failure, and every success resets it.
func TestControllerPropertiesUnderRandomWritesAndFailures(t *testing.T) {
	for seed := range uint64(24) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			checkControllerProperties(t, seed)
		})
	}
}

func checkControllerProperties(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	h := reconciletest.New(t)
	store := must.Do(memstore.New[string, value]())
	nKeys := 2 + rng.IntN(12)
	workers := 1 + rng.IntN(6)

	var mu sync.Mutex
	inFlight := map[string]bool{}
	var overlaps []string
	lastSeen := map[string]int{} // write number last reconciled; -1: gone
	outcomes := map[string][]string{}
	healthy := false // once set, every value succeeds

	rec := reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		if inFlight[key] {
			overlaps = append(overlaps, key)
		}
		inFlight[key] = true
		v, _, ok, _ := store.Get(context.Background(), key)
		does := v.does
		if !ok {
			lastSeen[key], does = -1, succeed
		} else {
			lastSeen[key] = v.write
		}
		if healthy {
			does = succeed
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[key] = false
			mu.Unlock()
		}()
		record := func(o string) {
			mu.Lock()
			outcomes[key] = append(outcomes[key], o)
			mu.Unlock()
		}
		switch does {
		case fail:
			record("when")
			return reconcile.Result{}, errors.New("fail")
		case panics:
			record("when")
			panic("boom")
		case requeue:
			record("forget")
			return reconcile.Result{RequeueAfter: time.Second}, nil
		case terminal:
			record("forget")
			return reconcile.Result{}, reconcile.Terminal(errors.New("terminal"))
		}
		record("forget")
		return reconcile.Result{}, nil
	})
	base := 100 * time.Millisecond
	limiter := &limiterLog{
		inner: backoff.NewPerKey[string](backoff.Exponential{Base: base, Cap: 30 * time.Second}),
		calls: map[string][]string{},
	}
	inf := reconciletest.Informer(h, "values", store)
	reconciletest.Controller(h, "values", rec, reconcile.For(inf), reconcile.WithWorkers(workers),
		reconcile.WithRateLimiter[string](limiter), quiet)

	write := 0
	for range 40 + rng.IntN(40) {
		key := fmt.Sprint("k", rng.IntN(nKeys))
		switch op := rng.IntN(10); {
		case op < 6:
			write++
			store.Put(key, value{write: write, does: behaviour(rng.IntN(int(behaviours)))})
		case op < 7:
			_, _ = store.Delete(context.Background(), key, 0)
		case op < 9:
			h.Step(time.Duration(rng.IntN(2000)) * time.Millisecond)
		default:
			h.Settle()
		}
	}
	h.Settle()
	mu.Lock()
	healthy = true
	mu.Unlock()
	// Everything failing is retried within the backoff cap; a write wakes
	// every key that a terminal error left alone.
	for i := range nKeys {
		key := fmt.Sprint("k", i)
		if v, _, ok, _ := store.Get(context.Background(), key); ok {
			write++
			store.Put(key, value{write: write, does: v.does})
		}
	}
	h.Step(30 * time.Second)
	h.Step(30 * time.Second)

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, overlaps, "keys reconciled by two workers at once")
	for i := range nKeys {
		key := fmt.Sprint("k", i)
		want := -1
		if v, _, ok, _ := store.Get(context.Background(), key); ok {
			want = v.write
		}
		if _, ever := lastSeen[key]; !ever && want == -1 {
			continue // never written
		}
		assert.Equal(t, want, lastSeen[key], "last write of %s reconciled", key)
	}
	limiter.mu.Lock()
	defer limiter.mu.Unlock()
	for key, outs := range outcomes {
		calls := limiter.calls[key]
		require.Len(t, calls, len(outs), "limiter calls for %s: %v, outcomes %v", key, calls, outs)
		n := 0 // consecutive failures
		for i, o := range outs {
			if o == "forget" {
				assert.Equal(t, "forget", calls[i], "%s: a success resets the backoff", key)
				n = 0
				continue
			}
			want := min(base<<n, 30*time.Second)
			assert.Equal(t, fmt.Sprint("when ", want), calls[i], "%s: failure %d backs off", key, n+1)
			n++
		}
	}
}
