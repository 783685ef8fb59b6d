package memstore

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/informer"
)

// ListAt returns every key and value as they were at revision rev: the
// snapshot a List made then would have returned. It is for tests and
// simulations that serve a lagging view, as a replica behind the leader
// does (the stale cache of an HA API server after a restart): list at an
// older revision, then Watch after it to catch up.
//
// It undoes the history after rev, so it costs O(keys) plus the changes
// since rev, under the read lock. It fails with an error that errors.Is
// informer.ErrRevisionExpired if the history no longer tells the state at
// rev: rev is above Revision(), or below the oldest revision Watch can
// resume after (see Compact and WithHistory), or a key updated after rev
// was last written before that oldest revision. Entries come in no order
// to rely on, but in the same order for the same history.
func (s *Store[K, V]) ListAt(ctx context.Context, rev informer.Revision) ([]informer.Entry[K, V], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	floor := s.floor()
	if rev > s.rev || rev < floor {
		return nil, fmt.Errorf("memory: list at revision %d: history holds revisions %d to %d: %w", rev, floor, s.rev, informer.ErrRevisionExpired)
	}
	// then holds the state at rev of every key changed after rev; unsure
	// the keys whose first change after rev was an update, which only an
	// earlier change can tell; gone the keys live at rev but not now, in
	// the order of the history, so that the result is deterministic.
	type state struct {
		value V
		live  bool
	}
	then := map[K]state{}
	unsure := map[K]bool{}
	var gone []K
	for r := rev + 1; r <= s.rev; r++ {
		c := s.log.at(s.slot(r))
		if _, seen := then[c.key]; seen || unsure[c.key] {
			continue
		}
		switch {
		case c.typ == informer.Delete:
			then[c.key] = state{value: c.value, live: true}
		case c.created:
			then[c.key] = state{}
		default:
			unsure[c.key] = true
		}
		if _, now := s.index[c.key]; !now {
			gone = append(gone, c.key)
		}
	}
	// An updated key's value at rev is its latest change at or before
	// rev, which the history holds unless it is older than floor.
	for r := rev; r > floor && len(unsure) > 0; r-- {
		c := s.log.at(s.slot(r))
		if unsure[c.key] {
			then[c.key] = state{value: c.value, live: c.typ == informer.Put}
			delete(unsure, c.key)
		}
	}
	for k := range unsure {
		return nil, fmt.Errorf("memory: list at revision %d: %v was last written before the history's start at %d: %w", rev, k, floor, informer.ErrRevisionExpired)
	}
	entries := make([]informer.Entry[K, V], 0, s.items.len()+len(gone))
	for it := range s.items.all() {
		st, changed := then[it.key]
		switch {
		case !changed:
			entries = append(entries, informer.Entry[K, V]{Key: it.key, Value: it.value})
		case st.live:
			entries = append(entries, informer.Entry[K, V]{Key: it.key, Value: st.value})
		}
	}
	for _, k := range gone {
		if st := then[k]; st.live {
			entries = append(entries, informer.Entry[K, V]{Key: k, Value: st.value})
		}
	}
	return entries, nil
}
