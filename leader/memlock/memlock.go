// Package memlock provides an in-process leader.Lock: a mutex-guarded record
// shared by every elector that is given the same *Lock. It is for tests and
// for single-binary programs that run several electors in one process; it
// offers no protection across processes.
package memlock

import (
	"context"
	"strings"
	"sync"

	"github.com/converge-go/converge/leader"
)

// Lock is a leader.Lock over a record in memory. The zero value is not
// usable; call NewLock. It is safe for concurrent use.
type Lock struct {
	mu sync.Mutex
	// rec is the stored record; meaningful only if exists.
	rec    leader.Record
	exists bool
	// version is the Version of the last write; it only grows, so a
	// Version is never reused even after many writes.
	version int64
}

// NewLock returns an empty lock: Get reports leader.ErrNotFound until the
// first Create.
func NewLock() *Lock { return &Lock{} }

var _ leader.Lock = (*Lock)(nil)

// Get returns the stored record or leader.ErrNotFound. It fails only if ctx
// is already done.
func (l *Lock) Get(ctx context.Context) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.exists {
		return leader.Record{}, leader.ErrNotFound
	}
	return l.rec, nil
}

// Create stores r with a fresh Version if no record exists, else returns
// leader.ErrConflict.
func (l *Lock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.exists {
		return leader.Record{}, leader.ErrConflict
	}
	return l.storeLocked(r), nil
}

// Update stores r with a fresh Version if the stored Version equals
// old.Version, else returns leader.ErrConflict.
func (l *Lock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.exists || l.rec.Version != old.Version {
		return leader.Record{}, leader.ErrConflict
	}
	return l.storeLocked(r), nil
}

// Describe returns "memory".
func (l *Lock) Describe() string { return "memory" }

func (l *Lock) storeLocked(r leader.Record) leader.Record {
	l.version++
	r.Version = l.version
	l.rec, l.exists = r, true
	return r
}

// Locks is a set of named in-memory locks, for leader/shard: Lock returns
// the same *Lock for the same name, and List reads the records under a
// prefix. The zero value is not usable; call NewLocks. It is safe for
// concurrent use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*Lock // guarded by mu
}

// NewLocks returns an empty set of locks.
func NewLocks() *Locks { return &Locks{locks: make(map[string]*Lock)} }

// Lock returns the lock called name, creating an empty one on first use.
func (s *Locks) Lock(name string) leader.Lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = NewLock()
		s.locks[name] = l
	}
	return l
}

// List returns the record of every lock whose name starts with prefix and
// that has one (a lock never created is absent). It fails only if ctx is
// already done. Each record is read atomically; together they are a
// snapshot only up to writes made while List runs, which in memory take
// no time to matter.
func (s *Locks) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]leader.Record)
	for name, l := range s.locks {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		l.mu.Lock()
		if l.exists {
			out[name] = l.rec
		}
		l.mu.Unlock()
	}
	return out, nil
}
