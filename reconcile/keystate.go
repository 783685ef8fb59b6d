package reconcile

import (
	"sync"
	"sync/atomic"
	"time"
)

// KeyStatus is what a controller knows about a key that is failing: see
// Controller.Status.
type KeyStatus struct {
	// Attempts counts the key's consecutive failed reconciles (errors and
	// panics) since its last success.
	Attempts int
	// LastError is the error of the last failed reconcile.
	LastError error
	// NextRetry is when the key is retried, by the controller's clock; zero
	// if it is not scheduled (parked, or a terminal error).
	NextRetry time.Time
	// Parked is true once the key failed WithMaxAttempts times: it is not
	// retried until it changes.
	Parked bool
	// Terminal is true if the last error was terminal (see Terminal): the
	// key is not retried until it changes.
	Terminal bool
}

// keyStates holds a KeyStatus for every key that failed since its last
// success; keys that succeed cost nothing here but an atomic load.
type keyStates[K comparable] struct {
	mu sync.Mutex
	// m is guarded by mu.
	m map[K]*KeyStatus
	// size is len(m) and nParked the parked keys among them, readable
	// without mu, so that the hot path can skip the map when it is empty.
	size, nParked atomic.Int64
}

func (ks *keyStates[K]) init() { ks.m = make(map[K]*KeyStatus) }

// reset forgets every key, as a new Run starts from the informers' state,
// calling forget for each: a key that was failing when the last Run ended
// may be gone from the store, and would otherwise keep its failure count in
// the rate limiter for good.
func (ks *keyStates[K]) reset(forget func(K)) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for k := range ks.m {
		forget(k)
	}
	clear(ks.m)
	ks.size.Store(0)
	ks.nParked.Store(0)
}

// getLocked returns key's status, creating it.
func (ks *keyStates[K]) getLocked(key K) *KeyStatus {
	st := ks.m[key]
	if st == nil {
		st = &KeyStatus{}
		ks.m[key] = st
		ks.size.Add(1)
	}
	return st
}

func (ks *keyStates[K]) deleteLocked(key K) {
	st, ok := ks.m[key]
	if !ok {
		return
	}
	if st.Parked {
		ks.nParked.Add(-1)
	}
	delete(ks.m, key)
	ks.size.Add(-1)
}

// succeeded forgets key.
func (ks *keyStates[K]) succeeded(key K) {
	if ks.size.Load() == 0 {
		return
	}
	ks.mu.Lock()
	ks.deleteLocked(key)
	ks.mu.Unlock()
}

// failed records a failed attempt and returns the number of consecutive
// failures; if it reaches maxAttempts (> 0), the key is parked.
func (ks *keyStates[K]) failed(key K, err error, maxAttempts int) (attempts int, parked bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	st := ks.getLocked(key)
	st.Attempts++
	st.LastError, st.Terminal, st.NextRetry = err, false, time.Time{}
	if maxAttempts > 0 && st.Attempts >= maxAttempts && !st.Parked {
		st.Parked = true
		ks.nParked.Add(1)
	}
	return st.Attempts, st.Parked
}

// terminal records a terminal error.
func (ks *keyStates[K]) terminal(key K, err error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	st := ks.getLocked(key)
	st.Attempts++
	st.LastError, st.Terminal, st.NextRetry = err, true, time.Time{}
}

// retryAt records when a failed key is retried. The rate limiter calls it
// right after failed, from the same worker.
func (ks *keyStates[K]) retryAt(key K, t time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if st, ok := ks.m[key]; ok {
		st.NextRetry = t
	}
}

// unpark reports whether key was parked, and forgets it if so, so that a
// change gives it a fresh start.
func (ks *keyStates[K]) unpark(key K) bool {
	if ks.nParked.Load() == 0 {
		return false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	st, ok := ks.m[key]
	if !ok || !st.Parked {
		return false
	}
	ks.deleteLocked(key)
	return true
}

func (ks *keyStates[K]) status(key K) (KeyStatus, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	st, ok := ks.m[key]
	if !ok {
		return KeyStatus{}, false
	}
	return *st, true
}

func (ks *keyStates[K]) parked() []K {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	var out []K
	for k, st := range ks.m {
		if st.Parked {
			out = append(out, k)
		}
	}
	return out
}
