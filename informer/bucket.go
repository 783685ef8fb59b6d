package informer

import (
	"context"
	"sync"
	"time"
)

// BucketSource is a Source whose keys fall into numbered buckets (as a
// sharded controller's do, see leader/shard) and that can list the keys of
// some buckets only, so that a replica caches only the buckets it holds.
// Its Watch may send every bucket's changes: Bucketed drops the others.
type BucketSource[K comparable, V any] interface {
	Source[K, V]
	// ListBuckets returns the entries of the given buckets (none: no
	// entries) as one consistent snapshot, and its revision, with List's
	// contract otherwise. A store with no changes yet still returns its
	// current revision.
	ListBuckets(ctx context.Context, buckets []int) (entries []Entry[K, V], rev Revision, err error)
}

// Bucketed returns a Source over src that holds no bucket until the
// informer following it is told to (Informer.AcquireBucket): its List
// lists only the held buckets, and its Watch passes on only their changes.
// bucketOf must give each key the bucket src files it under (for the
// stores in this module, shard.BucketOf of the key and the bucket count).
// It panics on a nil src or bucketOf.
//
// An informer over Bucketed caches only the held buckets' keys, so its
// memory falls with the number of replicas sharing the buckets. Its Watch
// still receives every bucket's changes from src (the stores in this module
// watch one prefix or one log), and drops those of other buckets.
func Bucketed[K comparable, V any](src BucketSource[K, V], bucketOf func(K) int) Source[K, V] {
	if isNil(src) || bucketOf == nil {
		panic("informer.Bucketed: nil source or bucket function")
	}
	return &bucketSource[K, V]{src: src, of: bucketOf, sem: make(chan struct{}, 1), held: make(map[int]*heldBucket[K, V])}
}

// bucketSource is Bucketed's Source.
//
// A bucket's keys enter the cache in two ways: with a List (of every held
// bucket), or by AcquireBucket's load (of one bucket, while the informer
// watches). The two must not interleave, or a List taken before a load and
// stored after it would drop the loaded keys: sem orders them. A load holds
// it throughout; a List holds it from before it reads the held set until
// the informer has stored the list, which is when it calls Watch (or when
// the List's context ends, if it never does).
type bucketSource[K comparable, V any] struct {
	src BucketSource[K, V]
	of  func(K) int
	sem chan struct{}

	mu sync.Mutex
	// held are the buckets acquired and not yet released, by ID. listHeld
	// is true while a List holds sem, and stopListCtx unhooks that List's
	// release on its context's end. All guarded by mu.
	held        map[int]*heldBucket[K, V]
	listHeld    bool
	stopListCtx func() bool
}

// heldBucket is one held bucket's state in a bucketSource.
type heldBucket[K comparable, V any] struct {
	refs int // AcquireBucket calls not yet released
	// loading is true while the bucket's keys are being loaded: Watch
	// keeps its changes in pending meanwhile, for the load to apply after
	// its snapshot.
	loading bool
	pending []Event[K, V]
	// floor is the revision of the bucket's load: Watch drops its changes
	// at or below it, which the load's snapshot holds already.
	floor Revision
}

func (s *bucketSource[K, V]) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *bucketSource[K, V]) unlock() { <-s.sem }

// releaseList releases sem if a List holds it.
func (s *bucketSource[K, V]) releaseList() {
	s.mu.Lock()
	held, stop := s.listHeld, s.stopListCtx
	s.listHeld, s.stopListCtx = false, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if held {
		s.unlock()
	}
}

// List lists the held buckets, and keeps sem until the informer has stored
// the result (see bucketSource).
func (s *bucketSource[K, V]) List(ctx context.Context) ([]Entry[K, V], Revision, error) {
	if err := s.lock(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	buckets := make([]int, 0, len(s.held))
	for b := range s.held {
		buckets = append(buckets, b)
	}
	s.mu.Unlock()
	entries, rev, err := s.src.ListBuckets(ctx, buckets)
	if err != nil {
		s.unlock()
		return nil, 0, err
	}
	s.mu.Lock()
	s.listHeld = true
	for _, b := range buckets {
		if h := s.held[b]; h != nil {
			h.floor = max(h.floor, rev)
		}
	}
	// A bucket released meanwhile (see ReleaseBucket) is left out.
	kept := entries[:0]
	for _, e := range entries {
		if s.held[s.of(e.Key)] != nil {
			kept = append(kept, e)
		}
	}
	s.stopListCtx = context.AfterFunc(ctx, s.releaseList)
	s.mu.Unlock()
	return kept, rev, nil
}

// Watch passes on the held buckets' changes above their floor, keeps
// those of buckets being loaded, and turns the others into bookmarks
// (see the comment on that).
func (s *bucketSource[K, V]) Watch(ctx context.Context, after Revision, emit func(Event[K, V]) error) error {
	s.releaseList()
	return s.src.Watch(ctx, after, func(ev Event[K, V]) error {
		if ev.Type == Bookmark {
			return emit(ev)
		}
		s.mu.Lock()
		h := s.held[s.of(ev.Key)]
		switch {
		case h != nil && h.loading:
			h.pending = append(h.pending, ev)
			s.mu.Unlock()
			return nil
		case h == nil || ev.Revision <= h.floor:
			s.mu.Unlock()
			// The revision moves on, so that WaitForRevision of a write to
			// another bucket returns. This takes the change's revision as
			// complete: a store transaction that changes keys of several
			// buckets at one revision, whose watch breaks between them,
			// could lose a held bucket's change (the stores in this module
			// write one key per revision).
			return emit(Event[K, V]{Type: Bookmark, Revision: ev.Revision})
		}
		s.mu.Unlock()
		return emit(ev)
	})
}

// AcquireBucket makes the informer cache bucket b's keys, and returns once
// they are in the cache. The handlers are not told of them (see load);
// they are told of the bucket's changes from then on. Calls nest: b stays
// cached until ReleaseBucket has been called as often. An informer whose
// source is not Bucketed caches every key anyway: for it this returns nil
// at once. It returns ctx's error, or the load's (b is then not held), if
// the load fails.
func (inf *Informer[K, V]) AcquireBucket(ctx context.Context, b int) error {
	s, ok := inf.src.(*bucketSource[K, V])
	if !ok {
		return nil
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	if h := s.held[b]; h != nil {
		h.refs++
		s.mu.Unlock()
		return nil
	}
	h := &heldBucket[K, V]{refs: 1, loading: true}
	s.held[b] = h
	s.mu.Unlock()

	entries, rev, err := s.src.ListBuckets(ctx, []int{b})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.held, b)
		return err
	}
	// Under s.mu, so that Watch sends b's next change only after these;
	// after dropping what a List raced past a release left (see
	// ReleaseBucket).
	inf.drop(s.of, b)
	inf.load(entries, rev)
	var later []Event[K, V]
	for _, ev := range h.pending {
		if ev.Revision > rev {
			later = append(later, ev)
		}
	}
	if len(later) > 0 {
		inf.applyAll(later, &watchRun[K, V]{after: rev})
	}
	h.loading, h.pending, h.floor = false, nil, rev
	return nil
}

// ReleaseBucket undoes one AcquireBucket of b; after the last, b's keys
// leave the cache and its changes are no longer followed. The handlers are
// not told: the keys were not deleted, this replica no longer looks at
// them. A no-op for a bucket not held, and for an informer whose source is
// not Bucketed.
func (inf *Informer[K, V]) ReleaseBucket(b int) {
	s, ok := inf.src.(*bucketSource[K, V])
	if !ok {
		return
	}
	// Waiting for sem orders the release after a List that may still
	// hold b, but a List can hang on an unreachable store, and a release
	// must not hang a replica's hand-over: past releaseWait it goes on.
	// A List stored after this release may then bring b's keys back,
	// stale and unfollowed, until b is acquired again (load clears them).
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	if s.lock(ctx) == nil {
		defer s.unlock()
	}
	s.mu.Lock()
	h := s.held[b]
	if h == nil {
		s.mu.Unlock()
		return
	}
	if h.refs--; h.refs > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.held, b)
	s.mu.Unlock()
	inf.drop(s.of, b)
}

// releaseWait bounds how long ReleaseBucket waits for a List in progress.
const releaseWait = time.Second

// drop removes bucket b's keys from the cache, silently.
func (inf *Informer[K, V]) drop(bucketOf func(K) int, b int) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	for k := range inf.bad {
		if bucketOf(k) == b {
			inf.clearBadLocked(k)
		}
	}
	for k := range inf.cache.all() {
		if bucketOf(k) == b {
			if _, _, err := inf.cache.remove(k); err != nil {
				inf.panicked(err, k, inf.lastRev, "removed anyway, from every index by a scan")
			}
		}
	}
}

// load adds one bucket's snapshot, taken at rev, to the cache. The
// handlers are not told, as ReleaseBucket does not tell them: the keys did
// not change, this replica starts looking at them (a sharded controller
// queues the bucket's keys itself once it admits them).
func (inf *Informer[K, V]) load(entries []Entry[K, V], rev Revision) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	for _, e := range entries {
		r := listedRev(e, rev)
		err := e.Err
		var v V
		if err == nil {
			v, err = inf.ingest(e.Value)
		}
		if err != nil {
			inf.markBadLocked(e.Key, r, err, e.Revision == 0)
			continue
		}
		if _, _, err := inf.cache.set(e.Key, v, r); err != nil {
			inf.panicked(err, e.Key, rev, "entry not cached")
			continue
		}
		inf.clearBadLocked(e.Key)
	}
}
