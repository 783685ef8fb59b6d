package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/converge-go/converge/leader"
)

// Sharder takes part in one sharded deployment: it keeps this replica's
// membership record alive, works out which buckets it should hold, holds
// them with one leader.Elector each, and runs the registered Handlers for
// each bucket it holds. Create one with New, register Handlers with Add,
// then call Run once. Status and Check are safe to call at any time.
type Sharder struct {
	backend Backend
	cfg     Config // defaults applied, validated

	mu sync.Mutex
	// Everything below is guarded by mu.
	handlers []Handler
	started  bool
	view     members
	// runs holds the buckets this replica campaigns for or holds; a
	// bucket leaves it once its elector has returned (see reap).
	runs map[int]*bucketRun
	// live and suspects are the last view's members, for Status.
	live, suspects []string
}

// New returns a Sharder over backend, or an error wrapping
// ErrInvalidConfig for a bad Config: an empty Name or Identity, an
// Identity with a "/", a negative Buckets or ListPeriod, a SuspectAfter out
// of range, or lease timings that leader.New rejects.
func New(backend Backend, cfg Config) (*Sharder, error) {
	if backend == nil {
		return nil, fmt.Errorf("%w: nil Backend", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Sharder{backend: backend, cfg: cfg, runs: make(map[int]*bucketRun)}, nil
}

// Buckets returns the number of buckets (Config.Buckets with its default).
func (s *Sharder) Buckets() int { return s.cfg.Buckets }

// MoveWithin is how long, on this replica's timings, a bucket whose owner
// stopped without releasing it (a crash, a pause, a partition) may stay
// without an owner: SuspectAfter + ListPeriod + LeaseDuration +
// RetryPeriod×JitterFactor (see the package doc).
func (s *Sharder) MoveWithin() time.Duration {
	c := s.cfg
	return c.SuspectAfter + c.ListPeriod + c.LeaseDuration + time.Duration(c.JitterFactor*float64(c.RetryPeriod))
}

// Identity returns this replica's identity.
func (s *Sharder) Identity() string { return s.cfg.Identity }

// Add registers h to serve every bucket this replica acquires. It fails
// once Run has started.
func (s *Sharder) Add(h Handler) error {
	if h == nil {
		return errors.New("shard: Add(nil)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("shard: Add after Run started")
	}
	s.handlers = append(s.handlers, h)
	return nil
}

func (s *Sharder) memberPrefix() string        { return s.cfg.Name + "/members/" }
func (s *Sharder) bucketName(b int) string     { return s.cfg.Name + "/buckets/" + strconv.Itoa(b) }
func (s *Sharder) memberName(id string) string { return s.memberPrefix() + id }

// ErrRunTwice is Run's error when the Sharder runs already. A
// reconcile.Manager runs the Sharder given as its ManagerOptions.Shards,
// which is the one way to run a Sharder under a Manager: running it also
// with Manager.AddFunc, or in a goroutine of one's own, is this error.
var ErrRunTwice = errors.New("shard: Run called twice on one Sharder (a reconcile.Manager runs the Sharder of " +
	"ManagerOptions.Shards: do not also run it with AddFunc or a goroutine of your own)")

// Run takes part until ctx is done, and returns nil then; it returns
// ErrRunTwice, at once, if the Sharder runs or has run already. When ctx is done it leaves gracefully: it
// releases its membership record first, so that the others start
// campaigning for its buckets, then gives every bucket up the planned way
// (stop, drain, release), and returns once every Handler has returned and
// every lease has been released or has lapsed.
func (s *Sharder) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return ErrRunTwice
	}
	s.started = true
	s.mu.Unlock()

	memberCtx, leave := context.WithCancel(context.WithoutCancel(ctx))
	defer leave()
	member, err := leader.New(s.backend.Lock(s.memberName(s.cfg.Identity)), s.cfg.electorConfig())
	if err != nil {
		return err // validated in New
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = member.Run(memberCtx) })

	for {
		s.forget(ctx, s.rebalance(ctx))
		if !s.sleep(ctx) {
			break
		}
	}
	leave()
	s.mu.Lock()
	runs := make([]*bucketRun, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.revoke()
	}
	for _, r := range runs {
		<-r.done
	}
	wg.Wait()
	return nil
}

// sleep waits one ListPeriod; false if ctx is done first.
func (s *Sharder) sleep(ctx context.Context) bool {
	t := s.cfg.Clock.NewTimer(s.cfg.ListPeriod)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// rebalance lists the members and starts or stops campaigning for each
// bucket. A replica wants a bucket if it is the bucket's owner by Assign
// over the live members, or over the members that are live and not
// suspected: the second lets it start timing a silent member's buckets
// before that member has expired. Safety does not depend on any of this:
// a bucket is only ever acted on under its lease.
//
// It returns the members whose records are due to be forgotten (see
// Config.ForgetAfter), with their versions.
func (s *Sharder) rebalance(ctx context.Context) (forget map[string]int64) {
	recs, err := s.backend.List(ctx, s.memberPrefix())
	if err != nil {
		return nil // keep campaigning as before; the next list may work
	}
	byID := make(map[string]leader.Record, len(recs))
	for name, r := range recs {
		byID[name[len(s.memberPrefix()):]] = r
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.view.observe(byID, now)
	if s.cfg.ForgetAfter > 0 {
		forget = s.view.stale(s.cfg.LeaseDuration+s.cfg.ForgetAfter, now, s.cfg.Identity)
	}
	s.live = s.view.within(s.cfg.LeaseDuration, now, s.cfg.Identity)
	fresh := s.view.within(s.cfg.SuspectAfter, now, s.cfg.Identity)
	s.suspects = s.suspects[:0]
	for _, m := range s.live {
		if !contains(fresh, m) {
			s.suspects = append(s.suspects, m)
		}
	}
	byLive, byFresh := Assign(s.live, s.cfg.Buckets), Assign(fresh, s.cfg.Buckets)
	for b := range s.cfg.Buckets {
		want := byLive[b] == s.cfg.Identity || byFresh[b] == s.cfg.Identity
		r, running := s.runs[b]
		switch {
		case running && r.finished():
			delete(s.runs, b)
			if want {
				s.runs[b] = s.startBucket(b)
			}
		case want && !running:
			s.runs[b] = s.startBucket(b)
		case !want && running:
			r.revoke()
		}
	}
	return forget
}

// forget deletes the member records in recs (identity → version). A
// record that changed meanwhile is kept (the delete is a compare-and-swap);
// a failed delete is tried again at the next list.
func (s *Sharder) forget(ctx context.Context, recs map[string]int64) {
	for id, version := range recs {
		_ = s.backend.Delete(ctx, s.memberName(id), version)
	}
}

func contains(sorted []string, s string) bool {
	for _, x := range sorted {
		if x == s {
			return true
		}
	}
	return false
}
