package nodelifecycle

import (
	"slices"
	"time"
)

// zoneState is a zone's health, as Kubernetes classes it
// (k8s@v1.37.2:pkg/controller/nodelifecycle/node_lifecycle_controller.go
// ComputeZoneState).
type zoneState string

const (
	stateInitial           zoneState = "Initial"
	stateNormal            zoneState = "Normal"
	statePartialDisruption zoneState = "PartialDisruption"
	stateFullDisruption    zoneState = "FullDisruption"
)

// computeZoneState: no Ready node is a full disruption; more than two not
// Ready nodes that are at least threshold of the zone a partial one.
func computeZoneState(ready, notReady int, threshold float64) zoneState {
	switch {
	case ready == 0 && notReady > 0:
		return stateFullDisruption
	case notReady > 2 && float64(notReady)/float64(notReady+ready) >= threshold:
		return statePartialDisruption
	default:
		return stateNormal
	}
}

// bucket is a token bucket of burst 1, as the node lifecycle controller's
// eviction limiter (k8s@v1.37.2:pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go
// EvictionRateLimiterBurst): one token is there when it is made, and one
// more comes every 1/rate seconds. It keeps the time the next token is
// due rather than a fractional count, so that it is exact on a fake
// clock. A rate of 0 or less never gives a token.
type bucket struct {
	rate float64
	next time.Time // when a token is there; the zero time: now
}

func (b *bucket) interval() time.Duration {
	return time.Duration(float64(time.Second) / b.rate)
}

// take takes the token if it is there.
func (b *bucket) take(now time.Time) bool {
	if b.rate <= 0 || now.Before(b.next) {
		return false
	}
	b.next = now.Add(b.interval())
	return true
}

// wait returns how long until a token is there, and false if none ever
// comes.
func (b *bucket) wait(now time.Time) (time.Duration, bool) {
	if b.rate <= 0 {
		return 0, false
	}
	return max(b.next.Sub(now), 0), true
}

// zone is one zone's state and its queue of nodes waiting for their
// NoExecute taint (the zoneNoExecuteTainter of Kubernetes).
type zone struct {
	state   zoneState
	limiter bucket
	queue   []string // node names, first come first tainted, each once
}

// setRate swaps the zone's limiter for a new, full one, as Kubernetes'
// SwapLimiter does.
func (z *zone) setRate(rate float64) {
	z.limiter = bucket{rate: rate}
}

func (z *zone) enqueue(node string) {
	if !slices.Contains(z.queue, node) {
		z.queue = append(z.queue, node)
	}
}

func (z *zone) remove(node string) {
	z.queue = slices.DeleteFunc(z.queue, func(n string) bool { return n == node })
}
