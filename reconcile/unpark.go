package reconcile

import "github.com/converge-go/converge/internal/workqueue"

// unparkReason is the trigger of a key queued by Unpark.
var unparkReason = workqueue.Reason{What: reasonWhat(TriggerUnparked, 0, -1)}

// Unpark retries a key parked after WithMaxAttempts failed attempts,
// without waiting for it to change: for a failure whose cause was outside
// the store (a service down, a quota raised since). The key's failures and
// its backoff are forgotten, so it gets WithMaxAttempts attempts afresh,
// and it is queued at once (a TriggerUnparked trigger), unless another
// replica owns it (WithShards). While the controller is not running, the
// key is only forgotten: the next Run lists it anyway. Unpark reports
// whether the key was parked; it does nothing to a key that is not, nor
// to a terminal error (see Terminal), which only a change retries.
//
// The debug pages offer it as a button on a parked key's page (a POST;
// see DebugOptions).
func (c *Controller[K]) Unpark(key K) bool {
	if !c.keys.unpark(key) {
		return false
	}
	c.unparked(key)
	return true
}

// UnparkAll unparks every parked key, as Unpark does each, and returns how
// many there were.
func (c *Controller[K]) UnparkAll() int {
	n := 0
	for _, k := range c.keys.parked() {
		if c.Unpark(k) {
			n++
		}
	}
	return n
}

// unparked forgets the backoff of a key just unparked, and queues it.
func (c *Controller[K]) unparked(key K) {
	c.limiter.Forget(key)
	if m := c.metrics; m != nil {
		m.parked.Dec()
	}
	r := c.current()
	if r == nil || r.stopping.Load() {
		return
	}
	if c.shards != nil && !c.shards.admits(key, enqueueEvent{}) { // not a change: not remembered as missed
		return
	}
	r.q.AddWithOptions(workqueue.AddOptions{Reason: unparkReason}, key)
}

// unparkString is Unpark for a key in its URL form (see inspectKeyString).
func (c *Controller[K]) unparkString(s string) bool {
	if k, ok := parseKey[K](s); ok {
		return c.Unpark(k)
	}
	if k, ok := c.keys.find(s); ok {
		return c.Unpark(k)
	}
	return false
}
