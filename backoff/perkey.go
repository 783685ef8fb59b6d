package backoff

import (
	"math"
	"sync"
	"time"
)

// PerKey is a [Limiter] that backs off each key on its own: a key's delay
// grows with its own consecutive failures and is unaffected by other keys
// failing. It is the exponential half of client-go's default controller
// rate limiter, with Factor and Jitter added.
//
// A PerKey is safe for concurrent use. Its memory grows with the number of
// keys that have failed and not been forgotten, so callers must Forget a key
// once it succeeds or is dropped.
type PerKey[K comparable] struct {
	// mu also guards backoff.Rand, which is not safe for concurrent use.
	mu       sync.Mutex
	backoff  Exponential
	failures map[K]int
}

var _ Limiter[string] = (*PerKey[string])(nil)

// NewPerKey returns a PerKey that computes delays with e. Settings that
// e.Validate rejects are repaired as [Exponential.Delay] documents, not
// reported; validate first where they come from a user.
//
// If e.Rand is set, the PerKey takes it over: the caller must not use that
// Rand elsewhere, since the PerKey draws from it under its own lock.
func NewPerKey[K comparable](e Exponential) *PerKey[K] {
	return &PerKey[K]{backoff: e, failures: make(map[K]int)}
}

// When returns e.Delay(n), where n is the number of failures recorded for
// key so far (0 the first time), and records one more failure.
func (p *PerKey[K]) When(key K) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.failures[key]
	if n < math.MaxInt { // Delay saturates long before; this only stops wrap-around.
		p.failures[key] = n + 1
	}
	return p.backoff.Delay(n)
}

// Forget resets key's failure count, so its next delay is Base again, and
// frees the memory kept for it.
func (p *PerKey[K]) Forget(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.failures, key)
}

// NumRequeues returns the number of failures recorded for key since it was
// last forgotten.
func (p *PerKey[K]) NumRequeues(key K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures[key]
}
