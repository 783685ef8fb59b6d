package simtest

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is the process's clock, for what must stop when the process is
// frozen: give it to a leader.Elector (Config.Clock). Now is the run's
// virtual time; a timer of the clock whose time comes while the process is
// frozen (a Depose fault, as a SIGSTOP or a long GC pause would) fires
// only once it thaws, late, as a frozen process's would. So a frozen
// leader neither renews its lease nor notices it has lost it, and its
// work, let go before the thaw, runs with its leader context still live:
// the case fencing exists for. Tickers (NewTicker, Tick) are not frozen.
func (p *Process) Clock() clock.WithTicker { return processClock{p} }

type processClock struct {
	p *Process
}

func (c processClock) Now() time.Time                         { return time.Now() }
func (c processClock) Since(t time.Time) time.Duration        { return time.Since(t) }
func (c processClock) Tick(d time.Duration) <-chan time.Time  { return clock.RealClock{}.Tick(d) }
func (c processClock) NewTicker(d time.Duration) clock.Ticker { return clock.RealClock{}.NewTicker(d) }
func (c processClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c processClock) Sleep(d time.Duration)                  { <-c.After(d) }

func (c processClock) NewTimer(d time.Duration) clock.Timer {
	t := &frozenTimer{p: c.p, c: make(chan time.Time, 1)}
	t.start(d)
	return t
}

// frozenTimer is a timer that waits for its process to thaw before it
// fires.
type frozenTimer struct {
	p *Process
	c chan time.Time

	mu   sync.Mutex
	stop chan struct{} // closed by Stop or Reset; nil once fired or stopped
}

func (t *frozenTimer) C() <-chan time.Time { return t.c }

// start runs one arming of the timer on a goroutine that ends when it
// fires or is stopped.
func (t *frozenTimer) start(d time.Duration) {
	stop := make(chan struct{})
	t.stop = stop
	go func() {
		real := time.NewTimer(d)
		defer real.Stop()
		var now time.Time
		select {
		case now = <-real.C:
		case <-stop:
			return
		}
		select {
		case <-t.p.thawed():
		case <-stop:
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stop != stop {
			return // stopped or reset meanwhile
		}
		t.stop = nil
		t.c <- now
	}()
}

func (t *frozenTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stop == nil {
		return false
	}
	close(t.stop)
	t.stop = nil
	return true
}

func (t *frozenTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	active := t.stop != nil
	if active {
		close(t.stop)
	}
	t.start(d)
	return active
}

// thawed returns a channel that is closed while the process is not
// frozen.
func (p *Process) thawed() <-chan struct{} {
	p.freezeMu.Lock()
	defer p.freezeMu.Unlock()
	if p.thaw == nil {
		return closedChan
	}
	return p.thaw
}

// freeze and unfreeze bracket a Depose fault's hold.
func (p *Process) freeze() {
	p.freezeMu.Lock()
	defer p.freezeMu.Unlock()
	if p.thaw == nil {
		p.thaw = make(chan struct{})
	}
}

func (p *Process) unfreeze() {
	p.freezeMu.Lock()
	defer p.freezeMu.Unlock()
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
