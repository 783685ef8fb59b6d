package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
)

// DefaultStuckAfter is ManagerOptions.StuckAfter's default. It is longer
// than etcd's default progress-notification interval (10 minutes): an
// informer on a quiet etcd prefix hears of other prefixes' writes, which
// move etcd's head, only through those notifications, and must not be
// called stuck meanwhile.
const DefaultStuckAfter = 15 * time.Minute

// headTimeout bounds one wait for the informers' store heads: every
// informer's is asked at once, and those that have not answered within it
// are shown with their last known head.
const headTimeout = 200 * time.Millisecond

// headMaxAge is how long a store head is reused before it is asked again:
// readiness probes, scrapes and page loads together ask each store at most
// about once a second.
const headMaxAge = time.Second

// informerStats is what the pages, readiness and metrics read from an
// informer: *informer.Informer has all of it.
type informerStats interface {
	Stats() informer.Stats
	LastRevision() informer.Revision
	Len() int
	Head(ctx context.Context) (informer.Revision, bool, error)
	AnyBadKeys() []informer.BadKey[any]
}

// informerHealth is what the Manager knows of one informer's progress: its
// store head, asked at most once per headMaxAge and never twice at once,
// and since when its revision has stood still behind that head.
type informerHealth struct {
	c Cache

	mu sync.Mutex
	// Guarded by mu:
	head      informer.Revision // the last head the store told
	headKnown bool              // head is set
	headErr   error             // the last ask's error, nil if it answered
	headAt    time.Time         // when the last ask ended; zero: never
	fetching  chan struct{}     // non-nil while an ask runs; closed at its end
	// seenRev is the informer's revision at the last look, and behind
	// when it was first seen behind the head at that revision (zero: not
	// behind).
	seenRev informer.Revision
	behind  time.Time
}

// informerView is the Manager's view of one informer, as /readyz, the
// metrics and the overview page use it.
type informerView struct {
	cache  Cache
	Name   string
	Synced bool
	// Stats and the rest are zero for a Cache that is not an
	// *informer.Informer.
	HasStats     bool
	Stats        informer.Stats
	Len          int
	LastRevision informer.Revision
	Head         informer.Revision
	HeadKnown    bool
	HeadError    string
	Lag          informer.Revision
	// StalledFor is how long the informer's revision has stood still behind
	// the store's head (0: it has not); Stuck is whether that passed
	// ManagerOptions.StuckAfter.
	StalledFor time.Duration
	Stuck      bool
}

// informerViews looks at every informer: it asks the stores whose head is
// older than headMaxAge for it, all at once, waits for them at most
// headTimeout (or until ctx is done), and then reads each informer's
// counters and revision.
func (m *Manager) informerViews(ctx context.Context) []informerView {
	m.mu.Lock()
	hs := append([]*informerHealth(nil), m.health...)
	m.mu.Unlock()
	return m.viewsOf(ctx, hs)
}

// viewsOf is informerViews for the given informers.
func (m *Manager) viewsOf(ctx context.Context, hs []*informerHealth) []informerView {
	var waits []<-chan struct{}
	now := m.opts.Clock.Now()
	for _, h := range hs {
		if w := h.refresh(now, m.opts.Clock); w != nil {
			waits = append(waits, w)
		}
	}
	if len(waits) > 0 {
		wctx, cancel := context.WithTimeout(ctx, headTimeout)
		for _, w := range waits {
			select {
			case <-w:
			case <-wctx.Done():
			}
		}
		cancel()
	}
	now = m.opts.Clock.Now()
	views := make([]informerView, len(hs))
	for i, h := range hs {
		views[i] = h.view(now, m.opts.StuckAfter)
	}
	return views
}

// refresh starts an ask for the store's head if the last one is older than
// headMaxAge and none runs, and returns a channel closed when the ask in
// progress ends; nil if the known head is fresh or the Source tells none.
func (h *informerHealth) refresh(now time.Time, clk interface{ Now() time.Time }) <-chan struct{} {
	s, ok := h.c.(informerStats)
	if !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fetching != nil {
		return h.fetching
	}
	if !h.headAt.IsZero() && now.Sub(h.headAt) < headMaxAge {
		return nil
	}
	done := make(chan struct{})
	h.fetching = done
	// The ask has its own bound, not the caller's: callers share it, and
	// one that gives up early must not cut it short for the others.
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), headTimeout)
		rev, known, err := s.Head(ctx)
		cancel()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fetching, h.headAt, h.headErr = nil, clk.Now(), err
		if err == nil {
			h.head, h.headKnown = rev, known
		}
	}()
	return done
}

// view reads the informer and updates since when its revision has stood
// still behind the last known head.
func (h *informerHealth) view(now time.Time, stuckAfter time.Duration) informerView {
	v := informerView{cache: h.c, Name: h.c.Name(), Synced: h.c.HasSynced()}
	s, ok := h.c.(informerStats)
	if !ok {
		return v
	}
	v.HasStats = true
	v.Stats, v.Len, v.LastRevision = s.Stats(), s.Len(), s.LastRevision()
	h.mu.Lock()
	defer h.mu.Unlock()
	v.Head, v.HeadKnown = h.head, h.headKnown
	if h.headErr != nil {
		v.HeadError = h.headErr.Error()
	} else if h.fetching != nil && h.headAt.IsZero() {
		v.HeadError = fmt.Sprintf("the store has not told its head within %v", headTimeout)
	}
	behind := v.Synced && v.HeadKnown && v.Head > v.LastRevision
	if behind {
		v.Lag = v.Head - v.LastRevision
	}
	// The clock restarts whenever the revision moves: an informer that
	// advances, however far behind, is slow, not stuck.
	switch {
	case !behind:
		h.behind = time.Time{}
	case v.LastRevision != h.seenRev || h.behind.IsZero():
		h.behind = now
	}
	h.seenRev = v.LastRevision
	if !h.behind.IsZero() {
		v.StalledFor = now.Sub(h.behind)
		v.Stuck = stuckAfter > 0 && v.StalledFor >= stuckAfter
	}
	return v
}
