package reconcile

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/converge-go/converge/internal/workqueue"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// inspectKey returns what the controller knows about key: its place in
// the queue, its failures, the reconcile in progress and its recent
// reconciles. The second result is false if the controller knows nothing
// of it (not in the For informer or WithDebugValue, not queued, not
// failing, not among the recent reconciles). The cost is one queue
// lookup, one failing-key lookup, one informer lookup and a pass over the
// workers' rings.
func (c *Controller[K]) inspectKey(key K) (debugpage.KeyInfo, bool) {
	info := debugpage.KeyInfo{Key: fmt.Sprint(key), Phase: "stopped"}
	known := false
	if st, ok := c.keys.status(key); ok {
		known = true
		info.Attempts, info.NextRetry, info.Parked, info.Terminal = st.Attempts, st.NextRetry, st.Parked, st.Terminal
		info.LastError, info.LastErrorLen = debugpage.ErrorText(st.LastError)
	}
	r := c.current()
	if r == nil {
		return info, known
	}
	info.Phase = workqueue.Absent.String()
	if q, ok := r.q.Inspect(key); ok {
		known = true
		info.Phase, info.Priority, info.Due, info.ReadySince = q.Phase.String(), q.Priority, q.Due, q.ReadySince
		info.Triggers, info.TriggersDropped = pageTriggers(c.queuedTriggers(&q.Reasons)), int(q.Reasons.Dropped)
	}
	for i := range r.slots {
		s := &r.slots[i]
		s.mu.Lock()
		if s.busy && s.key == key {
			info.InFlight, info.InFlightSince, info.InFlightTriggers = true, s.start, pageTriggers(c.triggers(s.why))
		}
		for j := range s.n {
			p := &s.ring[j]
			if p.key != key {
				continue
			}
			line := debugpage.ReconcileLine{ReconcileID: strconv.FormatUint(p.id, 10), Start: p.start, Duration: p.dur, Result: p.result, Triggers: pageTriggers(c.triggers(p.why))}
			line.Error, _ = debugpage.ErrorText(p.err)
			info.Recent = append(info.Recent, line)
		}
		s.mu.Unlock()
	}
	if len(info.Recent) > 0 || info.InFlight {
		known = true
	}
	// IDs rise with start times: sort numerically, newest first.
	slices.SortFunc(info.Recent, func(a, b debugpage.ReconcileLine) int {
		x, _ := strconv.ParseUint(a.ReconcileID, 10, 64)
		y, _ := strconv.ParseUint(b.ReconcileID, 10, 64)
		switch {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	if len(info.Recent) > 0 {
		info.LastDuration = info.Recent[0].Duration
	}
	if l := c.s.debug.events; l != nil {
		info.Events = l.Events(info.Key)
	}
	if b, ok := c.badKey(key); ok {
		known, info.Bad = true, &b
	}
	if c.valueOf != nil {
		// A key the informer holds has a page even when nothing else
		// remembers it: a healthy key whose last reconcile left the rings.
		if v, ok := c.valueOf(key); ok {
			known = true
			if c.showValues.Load() {
				info.Value = v
			}
		}
	}
	for _, l := range info.Recent {
		if l.Result != labelError && l.Result != labelRequeue {
			if !l.Start.IsZero() {
				info.LastSuccess = l.Start.Add(l.Duration)
			}
			break
		}
	}
	return info, known
}

// inspectKeyString is inspectKey for a key in its URL form: a key of a
// string or integer kind is parsed; another key type is found, by
// fmt.Sprint, among the keys the controller can list without walking its
// queue (failing keys, reconciles in progress and recent ones, the next
// ready keys).
func (c *Controller[K]) inspectKeyString(s string) (debugpage.KeyInfo, bool) {
	if k, ok := parseKey[K](s); ok {
		return c.inspectKey(k)
	}
	if k, ok := c.findKey(s); ok {
		return c.inspectKey(k)
	}
	return debugpage.KeyInfo{}, false
}

// findKey returns the known key whose fmt.Sprint is s.
func (c *Controller[K]) findKey(s string) (K, bool) {
	if k, ok := c.keys.find(s); ok {
		return k, true
	}
	var zero K
	r := c.current()
	if r == nil {
		return zero, false
	}
	for i := range r.slots {
		sl := &r.slots[i]
		sl.mu.Lock()
		if sl.busy && fmt.Sprint(sl.key) == s {
			k := sl.key
			sl.mu.Unlock()
			return k, true
		}
		for j := range sl.n {
			if k := sl.ring[j].key; fmt.Sprint(k) == s {
				sl.mu.Unlock()
				return k, true
			}
		}
		sl.mu.Unlock()
	}
	for _, k := range r.q.Peek(debugpage.ReadyShown) {
		if fmt.Sprint(k) == s {
			return k, true
		}
	}
	return zero, false
}

// find returns the failing key whose fmt.Sprint is s.
func (ks *keyStates[K]) find(s string) (found K, ok bool) {
	ks.scanFailing(runtime.Gosched, func(k K, _ *KeyStatus) bool {
		if fmt.Sprint(k) == s {
			found, ok = k, true
		}
		return !ok
	})
	return found, ok
}

// enableDebug makes the next Runs note the times the debug pages show:
// when keys became ready, when reconciles started and how long they took.
func (c *Controller[K]) enableDebug() { c.debug.Store(true) }

// clockNow is the controller's clock, which its times are on.
func (c *Controller[K]) clockNow() time.Time { return c.s.clock.Now() }

// parseKey reads s as a K of a string or integer kind (named types
// included) whose fmt.Sprint gives s back; false for other kinds.
func parseKey[K comparable](s string) (K, bool) {
	var k K
	v := reflect.ValueOf(&k).Elem()
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return k, false
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return k, false
		}
		v.SetUint(n)
	default:
		return k, false
	}
	// A String method may render the key otherwise: then it is not this
	// key's URL form.
	return k, fmt.Sprint(k) == s
}

// pageTriggers renders triggers for the debug pages.
func pageTriggers(ts []Trigger) []debugpage.Trigger {
	if ts == nil {
		return nil
	}
	out := make([]debugpage.Trigger, len(ts))
	for i, t := range ts {
		out[i] = debugpage.Trigger{Kind: t.Kind.String(), Watch: t.Watch, Rev: t.Rev, First: t.First, Count: t.Count, Text: t.String()}
		if t.Change != 0 {
			out[i].Change = t.Change.String()
		}
	}
	return out
}
