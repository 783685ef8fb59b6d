package shard

import (
	"context"
	"sync"

	"github.com/converge-go/converge/leader"
)

// bucketRun campaigns for one bucket and, while it holds it, runs the
// Handlers. It ends for good once revoked: its elector then stops (after
// the Handlers have drained, so that the lease is renewed throughout the
// drain) and releases the bucket; a later want starts a new bucketRun.
type bucketRun struct {
	id      int
	elector *leader.Elector
	// revoked is done once the bucket must be given up; the Handlers'
	// stop contexts follow it.
	revoked    context.Context
	markRevoke context.CancelFunc
	// stopElector cancels the elector's Run. It is called only when no
	// term's work runs (or none can start and drain), because cancelling
	// the elector's context cancels the term's lease context, which the
	// Handlers treat as "the lease is gone: stop at once".
	stopElector context.CancelFunc
	done        chan struct{} // closed when the elector's Run returned

	mu sync.Mutex
	// working is true while a term's Handlers run; term is that term's
	// bucket (for Status); isRevoked mirrors revoked under mu, so that
	// revoke and the end of a term agree on who stops the elector.
	working   bool
	term      Bucket
	isRevoked bool
}

// startBucket starts campaigning for bucket b. Called with s.mu held.
func (s *Sharder) startBucket(b int) *bucketRun {
	r := &bucketRun{id: b, done: make(chan struct{})}
	r.revoked, r.markRevoke = context.WithCancel(context.Background())
	electCtx, stop := context.WithCancel(context.Background())
	r.stopElector = stop
	cfg := s.cfg.electorConfig()
	handlers := s.handlers
	cfg.OnStartedLeading = func(lctx context.Context) { r.serve(lctx, handlers) }
	e, err := leader.New(s.backend.Lock(s.bucketName(b)), cfg)
	if err != nil {
		panic(err) // the same timings were validated in New
	}
	r.elector = e
	go func() {
		defer close(r.done)
		_ = e.Run(electCtx)
	}()
	return r
}

// serve is one term on the bucket: it runs every Handler with the term's
// bucket and waits for them.
func (r *bucketRun) serve(lctx context.Context, handlers []Handler) {
	epoch, _ := leader.TermFromContext(lctx)
	b := Bucket{ID: r.id, Epoch: epoch}
	r.mu.Lock()
	if r.isRevoked {
		// Won after being revoked: act on nothing; revoke has stopped
		// the elector, which releases the bucket once this returns.
		r.mu.Unlock()
		return
	}
	r.working, r.term = true, b
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.working = false
		revoked := r.isRevoked
		r.mu.Unlock()
		if revoked {
			r.stopElector() // drained: now release
		}
	}()

	lease := NewContext(lctx, b)
	stop, cancelStop := context.WithCancel(lease)
	defer cancelStop()
	unhook := context.AfterFunc(r.revoked, cancelStop)
	defer unhook()
	var wg sync.WaitGroup
	for _, h := range handlers {
		wg.Go(func() { h.ServeBucket(stop, lease, b) })
	}
	wg.Wait()
	// Handlers that return before stop leave the bucket held, idle, until
	// it is revoked or lost: returning early is not giving up.
	select {
	case <-stop.Done():
	case <-lctx.Done():
	}
}

// revoke gives the bucket up: the Handlers' stop contexts are cancelled,
// and the elector is stopped (releasing the bucket) once they have
// returned, or at once if no term runs. Idempotent.
func (r *bucketRun) revoke() {
	r.mu.Lock()
	first := !r.isRevoked
	r.isRevoked = true
	working := r.working
	r.mu.Unlock()
	if !first {
		return
	}
	r.markRevoke()
	if !working {
		r.stopElector()
	}
}

// finished reports whether the elector's Run has returned.
func (r *bucketRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// state returns the bucket of the running term and whether this replica
// holds it now (a term's Handlers run and its lease is live), and whether
// the bucket is being given up.
func (r *bucketRun) state() (b Bucket, holding, revoked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term, r.working && r.elector.IsLeader(), r.isRevoked
}
