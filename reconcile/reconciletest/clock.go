package reconciletest

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/informer"
)

// informerClock is the harness's fake clock as one informer sees it: the
// same clock, except for the tickers the informer makes (its resync). The
// harness ticks those itself, in Settle, and counts the ticks the informer
// has handled (its Stats().Resyncs), so that Settle knows exactly when a
// resync has reached the informer's handlers. A fake clock's own ticker
// cannot tell: Step hands its tick straight to the waiting goroutine,
// which may run only after Settle has looked.
type informerClock struct {
	*clocktesting.FakeClock

	// made is closed when the informer makes its first ticker.
	made chan struct{}

	mu sync.Mutex
	// Guarded by mu:
	tickers map[*resyncTicker]struct{}
	// sent counts the ticks sent, of every ticker, stopped ones included.
	sent uint64
	// handled returns how many ticks the informer has handled (set once
	// the informer exists; nil for makesTicker's probe).
	handled func() uint64
}

func newInformerClock(c *clocktesting.FakeClock) *informerClock {
	return &informerClock{FakeClock: c, made: make(chan struct{}), tickers: make(map[*resyncTicker]struct{})}
}

// resyncTicker ticks every period from when it was made, when the harness
// fires it. It holds one tick, like a time.Ticker, and skips the ticks
// due while the last one is being handled.
type resyncTicker struct {
	c      *informerClock
	ch     chan time.Time
	period time.Duration
	next   time.Time // guarded by c.mu
}

func (t *resyncTicker) C() <-chan time.Time { return t.ch }

func (t *resyncTicker) Stop() {
	t.c.mu.Lock()
	delete(t.c.tickers, t)
	t.c.mu.Unlock()
}

// NewTicker makes a ticker the harness ticks (see informerClock). d must be
// positive, as for time.NewTicker.
func (c *informerClock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("reconciletest: non-positive interval for NewTicker")
	}
	t := &resyncTicker{c: c, ch: make(chan time.Time, 1), period: d, next: c.Now().Add(d)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tickers) == 0 {
		select {
		case <-c.made:
		default:
			close(c.made)
		}
	}
	c.tickers[t] = struct{}{}
	return t
}

// fire sends one tick of a ticker that is due by the clock's time, unless
// a tick sent before is still being handled, and reports whether it sent
// one. A ticker whose ticks were due several times over sends one, as a
// time.Ticker drops the ticks a slow receiver misses.
func (c *informerClock) fire() bool {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handled == nil || c.sent > c.handled() {
		return false
	}
	for t := range c.tickers {
		if now.Before(t.next) {
			continue
		}
		t.next = t.next.Add((now.Sub(t.next)/t.period + 1) * t.period)
		select {
		case t.ch <- t.next:
			c.sent++
			return true
		default: // a tick is waiting already
		}
	}
	return false
}

// tickPending reports whether a tick has been sent that the informer has
// not finished handling.
func (c *informerClock) tickPending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handled != nil && c.sent > c.handled()
}

// setHandled sets where the clock reads how many ticks the informer has
// handled.
func (c *informerClock) setHandled(handled func() uint64) {
	c.mu.Lock()
	c.handled = handled
	c.mu.Unlock()
}

// makesTicker reports whether an informer built with opts makes a ticker
// when it runs (a resync): it builds one over an empty source and runs it
// with a done context. Run makes the resync ticker first thing in a
// goroutine it waits for, so the answer is known when Run returns. An
// informer given a clock of its own in opts makes no ticker on the
// harness's.
func makesTicker[K comparable, V any](opts []informer.Option) bool {
	c := newInformerClock(clocktesting.NewFakeClock(time.Time{}))
	all := append(append([]informer.Option{informer.WithClock(c)}, opts...),
		informer.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	probe, err := informer.New("probe", emptySource[K, V]{}, all...)
	if err != nil {
		return false // Informer has failed the test on the same options
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = probe.Run(ctx)
	select {
	case <-c.made:
		return true
	default:
		return false
	}
}

// emptySource is a store with nothing in it, for makesTicker.
type emptySource[K comparable, V any] struct{}

func (emptySource[K, V]) List(ctx context.Context) ([]informer.Entry[K, V], informer.Revision, error) {
	return nil, 0, ctx.Err()
}

func (emptySource[K, V]) Watch(ctx context.Context, _ informer.Revision, _ func(informer.Event[K, V]) error) error {
	<-ctx.Done()
	return ctx.Err()
}
