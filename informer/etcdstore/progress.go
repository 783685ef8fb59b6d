package etcdstore

import (
	"time"

	"k8s.io/utils/clock"
)

// WithProgressInterval sets how long a Watch may hear nothing from etcd (no
// event, no notification) before it asks etcd for a progress notification
// (clientv3's RequestProgress, on the watch's own stream), which becomes a
// Bookmark at etcd's current revision. etcd notifies progress on its own
// only every --experimental-watch-progress-notify-interval (10 minutes by
// default), so without it an informer over a quiet prefix stays at its
// last revision while writes under other prefixes move etcd's head ahead,
// and looks stuck to readiness (reconcile.ManagerOptions.StuckAfter) and
// slow to a head barrier. It costs nothing while events flow: the one
// timer of each Watch restarts at every response, and only a prefix
// quiet for d is asked about, once per d. A progress request is answered on
// every watch of the client's stream, so quiet watches sharing a client
// mostly ride on each other's requests.
//
// Off by default, because on etcd before 3.4.25 and 3.5.8 (Debian's 3.4.23
// among them) a requested notification can carry a revision past changes
// that a watch still catching up has not sent yet (etcd-io/etcd#15220): the
// informer would take the bookmark as "complete up to here", a watch
// restarted from it would skip those changes, and a read-your-writes wait
// could end before the write arrives. On a fixed etcd a few seconds is
// safe, and lets ManagerOptions.StuckAfter be short; on an older one, lower
// the server's --experimental-watch-progress-notify-interval instead (its
// own notifications go only to watches that have caught up).
//
// Default: 0, never ask; bookmarks then come only from etcd's own
// notifications. Zero or negative: never ask.
func WithProgressInterval[V any](d time.Duration) Option[V] {
	return func(o *options[V]) {
		o.progressInterval = d
	}
}

// WithClock sets the clock that times WithProgressInterval; client-go's
// fake clock (k8s.io/utils/clock/testing) makes the progress requests of a
// quiet watch happen when a test steps it. Default, and when clk is nil:
// the real clock.
func WithClock[V any](clk clock.WithTicker) Option[V] {
	return func(o *options[V]) { o.clock = clk }
}

// progressTimer fires when a watch has heard nothing for the interval; a
// nil one never fires.
type progressTimer struct {
	t clock.Timer
	d time.Duration
}

func newProgressTimer(clk clock.WithTicker, d time.Duration) *progressTimer {
	if d <= 0 {
		return nil
	}
	return &progressTimer{t: clk.NewTimer(d), d: d}
}

// C returns the channel the timer fires on; nil (never ready) for a nil
// timer.
func (p *progressTimer) C() <-chan time.Time {
	if p == nil {
		return nil
	}
	return p.t.C()
}

// Reset restarts the wait. A firing not yet received is dropped: the real
// clock's timers drop it themselves (since Go 1.23), a fake clock's keep it.
func (p *progressTimer) Reset() {
	if p == nil {
		return
	}
	select {
	case <-p.t.C():
	default:
	}
	p.t.Reset(p.d)
}

// Stop releases the timer.
func (p *progressTimer) Stop() {
	if p != nil {
		p.t.Stop()
	}
}
