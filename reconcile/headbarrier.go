package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/converge-go/converge/informer"
)

// The head barrier: Wrote keeps a key back until its informer holds the
// reconcile's own writes, but only this process's writes. A replica that
// gains leadership (or a controller that starts while its informers run
// already) may have caches that lag writes another replica made just
// before: its predecessor's last writes, still in flight on the watch. A
// reconcile that read such a cache would act on a world its predecessor
// has already changed (create a child twice, see a deletion undone).
// Optimistic concurrency refuses the stale writes, but the reconcile is
// still wasted and its side effects outside the store are not guarded.
//
// So, with WithHeadBarrier, before its workers start each Run reads the store's head revision
// through every watched informer that can tell it (informer.Informer.Head:
// memstore, etcdstore and pgstore can), and waits until each cache has
// reached the head it read. The wait shares the sync timeout's bound
// (WithSyncTimeout) but has its own timer, started when the caches have
// synced: a Run may thus wait up to twice the sync timeout before its
// first reconcile. At the timeout, or if a head cannot be read, the
// workers start anyway with a warning: an informer that lost its store
// must not hold every key of the controller, and the store's revision
// checks still refuse writes made on a stale read.
//
// What the barrier cannot do:
//   - A Source that cannot tell its head (a FromFunc or a poll Source, a
//     Cache that is not an informer) is not waited for.
//   - etcd's head is the cluster's revision, moved by writes under other
//     prefixes too; an informer reaches it with its next event, or else
//     with etcd's next progress notification (the server's
//     --experimental-watch-progress-notify-interval, 10 minutes by
//     default). On a busy shared cluster with a quiet prefix the barrier
//     may thus wait for its timeout.
//   - Writes that commit after the head is read are not waited for: they
//     are ordinary changes, which the watch delivers like any other.

// WithHeadBarrier makes each Run (a Manager's start, every
// leadership gained) hold its workers until every watched informer has
// reached its store's head revision, as described above. Turn it on for a
// controller whose reconciles act outside the store on what they read
// (create a cloud resource per child counted in the cache), so that a new
// leader does not act on a cache that misses its predecessor's last
// writes. On etcd, give the server a short
// --experimental-watch-progress-notify-interval (or a prefix that is
// written often), or the first reconcile may wait for the sync timeout.
//
// Its cost: about a microsecond per Run over caches that hold the head
// already (one head read and one revision check per informer; an etcd or
// PostgreSQL head read is one round trip), nothing per reconcile, and a
// lagging cache's lag. Default: off (a Run's workers start once the caches
// hold their first list), because of etcd's 10-minute default progress
// notification interval above.
func WithHeadBarrier() Option {
	return func(s *settings) error {
		s.headBarrier = true
		return nil
	}
}

// headWaiter is a cache that can tell its store's head revision and wait
// for a revision: *informer.Informer is one.
type headWaiter interface {
	Name() string
	Head(ctx context.Context) (informer.Revision, bool, error)
	LastRevision() informer.Revision
	WaitForRevision(ctx context.Context, rev informer.Revision) error
}

// waitForHead holds the Run until every watched informer that can tell its
// store's head has reached the head read now, at most the sync timeout;
// see above. It returns when ctx is done, without error: the caller checks
// ctx.
func (r *run[K]) waitForHead(ctx context.Context) {
	if !r.c.s.headBarrier {
		return
	}
	type target struct {
		cache headWaiter
		head  informer.Revision
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := r.c.s.clock.AfterFunc(r.c.s.syncTimeout, cancel)
	defer t.Stop()
	log := r.c.s.logger
	// Read every head first: they all stand for "now", whatever the
	// waits after them take.
	var targets []target
	for _, cache := range r.c.Caches() {
		h, ok := cache.(headWaiter)
		if !ok {
			continue
		}
		head, ok, err := h.Head(bctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("cannot read the store's head revision; not waiting for the informer to reach it",
				"controller", r.c.name, "informer", h.Name(), "error", err)
		case ok && h.LastRevision() < head:
			targets = append(targets, target{h, head})
		}
	}
	var late []string
	for _, tg := range targets {
		if err := tg.cache.WaitForRevision(bctx, tg.head); err != nil {
			if ctx.Err() != nil {
				return
			}
			late = append(late, fmt.Sprintf("%q (at %d of %d)", tg.cache.Name(), tg.cache.LastRevision(), tg.head))
		}
	}
	if len(late) > 0 {
		log.Warn("informers did not reach the store's head revision within the sync timeout; starting anyway",
			"controller", r.c.name, "timeout", r.c.s.syncTimeout, "informers", strings.Join(late, ", "))
	}
}
