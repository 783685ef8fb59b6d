package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/informer"
)

// index is what a StoreSink knows of the records under its prefix: per
// event key, each record's store key and the Last it was stored with.
// Guarded by the sink's io lock.
type index struct {
	keys map[string]map[string]time.Time
	// listed is when the index was last rebuilt from a List of the store;
	// zero before the first.
	listed time.Time
	// count mirrors the number of records, for Stats without the io lock.
	count atomic.Int64
}

func (x *index) set(key, storeKey string, last time.Time) {
	recs := x.keys[key]
	if recs == nil {
		recs = make(map[string]time.Time)
		x.keys[key] = recs
	}
	if _, ok := recs[storeKey]; !ok {
		x.count.Add(1)
	}
	recs[storeKey] = last
}

func (x *index) forget(key, storeKey string) {
	recs := x.keys[key]
	if _, ok := recs[storeKey]; !ok {
		return
	}
	delete(recs, storeKey)
	x.count.Add(-1)
	if len(recs) == 0 {
		delete(x.keys, key)
	}
}

// DeleteKey deletes key's events from the store, at the next Flush (Run
// flushes at once), and drops those of its events still pending. Call it
// when the key is gone, from the reconcile that finds it absent or through
// DeletionHandler; the sink cannot tell by itself. It deletes the records
// the sink knows of (see StoreSink's retention); an event of key recorded
// after it is written as usual, and expires with the TTL.
func (s *StoreSink) DeleteKey(key string) {
	s.mu.Lock()
	for sk, e := range s.pending {
		if e.Key == key {
			delete(s.pending, sk)
		}
	}
	s.nameGoneLocked(key)
	s.mu.Unlock()
	s.signal()
}

// nameGoneLocked adds key to the keys whose records the next Flush or
// Prune deletes. s.mu must be held.
func (s *StoreSink) nameGoneLocked(key string) {
	if s.gone == nil {
		s.gone = make(map[string]struct{})
	}
	s.gone[key] = struct{}{}
}

// DeletionHandler returns an informer handler that calls s.DeleteKey with
// fmt.Sprint of every key the informer reports deleted (the event key a
// Recorder is given for a non-string key): add it to the informer of the
// objects the events are about, and a deleted object's events go with it.
// Every replica's informer sees the deletion; deleting the records twice
// is harmless.
func DeletionHandler[K comparable, V any](s *StoreSink) informer.HandlerFuncs[K, V] {
	return informer.HandlerFuncs[K, V]{DeleteFunc: func(key K, _ V) { s.DeleteKey(fmt.Sprint(key)) }}
}

// Prune deletes the records under the sink's prefix that were last recorded
// more than the TTL ago, then enforces WithMaxPerKey and DeleteKey as Flush
// does. If it has not listed the store within the last TTL it lists it
// first, to learn the records it did not write. It returns an error if the
// list, or any read or delete, failed; what it could not delete it tries
// again next time. Run calls it; a test or a program without Run may.
func (s *StoreSink) Prune(ctx context.Context) error {
	s.io.Lock()
	defer s.io.Unlock()
	now := s.clock.Now()
	if s.records.listed.IsZero() || now.Sub(s.records.listed) >= s.ttl {
		if err := s.relist(ctx, now); err != nil {
			s.failed.Add(1)
			return err
		}
	}
	var errs errCount
	cutoff := now.Add(-s.ttl)
	for _, key := range slices.Collect(maps.Keys(s.records.keys)) {
		for sk, last := range s.records.keys[key] {
			if last.After(cutoff) {
				continue
			}
			if err := s.deleteRecord(ctx, key, sk, cutoff); err != nil {
				errs.add(err)
			}
		}
		s.capKey(ctx, key, &errs)
	}
	s.deleteGone(ctx, &errs)
	return errs.err()
}

// relist rebuilds the index from the store's records under the prefix.
// A record whose value could not be decoded is left alone: the sink
// cannot tell its key or age.
func (s *StoreSink) relist(ctx context.Context, now time.Time) error {
	entries, _, err := s.st.List(ctx)
	if err != nil {
		return fmt.Errorf("events: list the stored events: %w", err)
	}
	s.records.keys = make(map[string]map[string]time.Time)
	s.records.count.Store(0)
	for _, e := range entries {
		if e.Err == nil && strings.HasPrefix(e.Key, s.prefix) {
			s.records.set(e.Value.Key, e.Key, e.Value.Last)
		}
	}
	s.records.listed = now
	return nil
}

// capKey deletes key's least recently recorded records beyond maxPerKey.
func (s *StoreSink) capKey(ctx context.Context, key string, errs *errCount) {
	recs := s.records.keys[key]
	if len(recs) <= s.maxPerKey {
		return
	}
	oldest := slices.SortedFunc(maps.Keys(recs), func(a, b string) int {
		return cmp.Or(recs[a].Compare(recs[b]), strings.Compare(a, b))
	})
	for _, sk := range oldest[:len(oldest)-s.maxPerKey] {
		if err := s.deleteRecord(ctx, key, sk, time.Time{}); err != nil {
			errs.add(err)
		}
	}
}

// deleteGone deletes the records of the keys DeleteKey named; a key whose
// records could not all be deleted stays named.
func (s *StoreSink) deleteGone(ctx context.Context, errs *errCount) {
	s.mu.Lock()
	gone := s.gone
	s.gone = nil
	s.mu.Unlock()
	for key := range gone {
		failed := false
		for sk := range s.records.keys[key] {
			if err := s.deleteRecord(ctx, key, sk, time.Time{}); err != nil {
				errs.add(err)
				failed = true
			}
		}
		if failed {
			s.mu.Lock()
			s.nameGoneLocked(key)
			s.mu.Unlock()
		}
	}
}

// deleteRecord deletes the record at storeKey, of event key key. With a
// non-zero cutoff it reads the record and deletes it only if it was last
// recorded at or before cutoff, at the revision it read, so that a record
// another writer refreshed meanwhile stays (and the index learns its
// Last). With a zero cutoff nothing is compared, so it deletes whatever
// revision is stored, without reading it. A record already gone is
// forgotten.
func (s *StoreSink) deleteRecord(ctx context.Context, key, storeKey string, cutoff time.Time) error {
	var rev informer.Revision // 0: whatever is stored
	if !cutoff.IsZero() {
		v, r, ok, err := s.st.Get(ctx, storeKey)
		if err != nil {
			s.failed.Add(1)
			return fmt.Errorf("events: read %s to delete it: %w", storeKey, err)
		}
		if !ok {
			s.records.forget(key, storeKey)
			return nil
		}
		if v.Last.After(cutoff) {
			s.records.set(key, storeKey, v.Last)
			return nil
		}
		rev = r
	}
	deleted, err := s.st.Delete(ctx, storeKey, rev)
	if err != nil {
		s.failed.Add(1)
		if errors.Is(err, informer.ErrConflict) {
			err = fmt.Errorf("%w (written meanwhile; tried again later)", err)
		}
		return fmt.Errorf("events: delete %s: %w", storeKey, err)
	}
	s.records.forget(key, storeKey)
	if deleted != 0 { // 0: it was gone already
		s.deleted.Add(1)
	}
	return nil
}
