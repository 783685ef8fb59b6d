package httpstore

import "github.com/converge-go/converge/informer"

// selectorParam is the query parameter of a list's or a watch's selector.
const selectorParam = "selector"

// selected says whether a key is in a selection. A value the store could
// not decode is in every selection: whether it matches cannot be known,
// and the client's informer must hear of it to report the key as bad.
func selected[V any](match func(string, V) bool, key string, v V, err error) bool {
	return err != nil || match(key, v)
}

// selection decides which of a store's events a selected watch sends. What
// a client holds is known only from a list: the server lists the store
// when the watch starts, at revision listed, and keeps in up to date from
// there. Events at or below listed (a watch resumed from an older
// revision) come before what the list tells: for each key, until its
// first event, whether the client holds it is unknown, so a first event
// that is not selected is sent as a DELETE, which a client that does not
// hold the key ignores.
type selection[V any] struct {
	match func(string, V) bool
	// in holds the selected keys, as of listed and then of the last event.
	in     map[string]bool
	listed informer.Revision
	// replayed holds, for the keys that had an event at or below listed,
	// whether they were selected after it; nil once past listed.
	replayed map[string]bool
}

func newSelection[V any](match func(string, V) bool, entries []informer.Entry[string, V], listed informer.Revision) *selection[V] {
	s := &selection[V]{match: match, in: map[string]bool{}, listed: listed, replayed: map[string]bool{}}
	for _, e := range entries {
		if selected(match, e.Key, e.Value, e.Err) {
			s.in[e.Key] = true
		}
	}
	return s
}

// filter returns what to send for ev, and false to send nothing: a Put
// that is selected; a DELETE, without a value, for a key that leaves the
// selection (a Put that no longer matches, or a Delete); bookmarks as they
// are.
func (s *selection[V]) filter(ev informer.Event[string, V]) (informer.Event[string, V], bool) {
	if ev.Type != informer.Put && ev.Type != informer.Delete {
		return ev, true
	}
	now := ev.Type == informer.Put && selected(s.match, ev.Key, ev.Value, ev.Err)
	var was bool
	if ev.Revision <= s.listed {
		held, known := s.replayed[ev.Key]
		s.replayed[ev.Key] = now
		was = held || !known
	} else {
		s.replayed = nil
		was = s.in[ev.Key]
		if now {
			s.in[ev.Key] = true
		} else {
			delete(s.in, ev.Key)
		}
	}
	switch {
	case now:
		return ev, true
	case was && ev.Type == informer.Delete:
		return ev, true
	case was:
		return informer.Event[string, V]{Type: informer.Delete, Key: ev.Key, Revision: ev.Revision}, true
	}
	return ev, false
}
