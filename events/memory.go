package events

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
)

// DefaultMemoryKeys bounds the keys a MemorySink keeps by default.
const DefaultMemoryKeys = 4096

// MemorySink keeps the newest events of each key in memory, for a debug
// page, a describe view or a test. It is bounded: per key the
// MaxEventsPerKey most recently recorded events (older ones dropped), and at
// most its key limit (the least recently recorded key dropped). Create one
// with NewMemorySink; it is safe for concurrent use.
type MemorySink struct {
	maxKeys int

	mu sync.Mutex
	// keys maps a key to its events, newest first; lru orders the keys,
	// most recently written first (values are *memKey). Guarded by mu.
	keys map[string]*memKey
	lru  *list.List
}

type memKey struct {
	key    string
	elem   *list.Element
	events []Event // newest (by the order written) first
}

// NewMemorySink returns a sink that keeps at most maxKeys keys (0:
// DefaultMemoryKeys). It returns an error for a negative maxKeys.
func NewMemorySink(maxKeys int) (*MemorySink, error) {
	if maxKeys < 0 {
		return nil, fmt.Errorf("events.NewMemorySink(%d): want >= 0", maxKeys)
	}
	if maxKeys == 0 {
		maxKeys = DefaultMemoryKeys
	}
	return &MemorySink{maxKeys: maxKeys, keys: make(map[string]*memKey), lru: list.New()}, nil
}

// Write keeps e as its key's newest event, replacing the version with its
// ID it held unless that one is newer (a larger Count, or the same Count
// seen later), which it keeps.
func (m *MemorySink) Write(_ context.Context, e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk, ok := m.keys[e.Key]
	if ok {
		m.lru.MoveToFront(mk.elem)
	} else {
		if len(m.keys) >= m.maxKeys {
			old := m.lru.Remove(m.lru.Back()).(*memKey)
			delete(m.keys, old.key)
		}
		mk = &memKey{key: e.Key}
		mk.elem = m.lru.PushFront(mk)
		m.keys[e.Key] = mk
	}
	i := slices.IndexFunc(mk.events, func(x Event) bool { return x.ID == e.ID })
	switch {
	case i >= 0 && mk.events[i].newer(e):
		return // a later version got here first
	case i >= 0:
		mk.events = slices.Delete(mk.events, i, i+1)
	case len(mk.events) >= MaxEventsPerKey:
		mk.events = mk.events[:len(mk.events)-1]
	}
	mk.events = slices.Insert(mk.events, 0, e)
}

// Events returns a copy of key's events, most recently recorded first; nil
// for a key it does not hold.
func (m *MemorySink) Events(key string) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mk, ok := m.keys[key]; ok {
		return slices.Clone(mk.events)
	}
	return nil
}

// Keys returns the keys it holds events for, most recently written first.
func (m *MemorySink) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.keys))
	for e := m.lru.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*memKey).key)
	}
	return out
}
