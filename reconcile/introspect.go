package reconcile

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/converge-go/converge/events"
)

// debugSettings are the options that say what a controller shows of itself
// in logs, spans and debug pages.
type debugSettings struct {
	// triggers is WithTriggerReasons's choice: 0 unset (on with debug
	// pages only), 1 on, 2 off.
	triggers uint8
	// events lists each key's recent events for its debug page; nil
	// without WithEventRecorder.
	events eventLister
	// value is a func(K) (any, bool) from WithDebugValue, checked by New.
	value any
}

// eventLister lists a key's recent events, newest first: an
// events.MemorySink does.
type eventLister interface {
	Events(key string) []events.Event
}

// WithEventRecorder shows the events r records on the controller's keys
// (events.Event.Key is fmt.Sprint of the key) on each key's debug page,
// newest first. r must have a sink that lists them, an events.MemorySink
// (events.WithSink(events.NewMemorySink(0))), or New fails. The reconciler records with r as it would anyway; give r
// events.WithContextID(reconcile.ReconcileID) to stamp each event with the
// reconcile that recorded it. Default: no events shown.
func WithEventRecorder(r *events.Recorder) Option {
	return func(s *settings) error {
		if r == nil {
			return errors.New("WithEventRecorder(nil)")
		}
		for _, sink := range r.Sinks() {
			if l, ok := sink.(eventLister); ok {
				s.debug.events = l
				return nil
			}
		}
		return fmt.Errorf("WithEventRecorder(%q): the recorder has no sink that lists events: give it events.WithSink(events.NewMemorySink(0))", r.Source())
	}
}

// WithDebugValue sets how a key's debug page finds the key's value, shown
// only when values are shown at all (ManagerOptions Debug.ShowValues,
// default off: values may hold secrets). value returns
// false for a key it has no value for. K must be the controller's key
// type, or New fails. Default: the value in the informer given to For, if
// any.
func WithDebugValue[K comparable](value func(K) (any, bool)) Option {
	return func(s *settings) error {
		if value == nil {
			return errors.New("WithDebugValue(nil)")
		}
		s.debug.value = value
		return nil
	}
}

// debugValueOf returns the controller's value function: WithDebugValue's,
// else the For informer's, else nil.
func debugValueOf[K comparable](s *settings, watches []watch[K]) (func(K) (any, bool), error) {
	switch v := s.debug.value.(type) {
	case nil:
	case func(K) (any, bool):
		return v, nil
	default:
		return nil, fmt.Errorf("WithDebugValue: %T does not take keys of type %v", v, reflect.TypeFor[K]())
	}
	for _, w := range watches {
		if p, ok := w.(interface {
			primaryValue(K) (any, bool)
			primary() bool
		}); ok && p.primary() {
			return p.primaryValue, nil
		}
	}
	return nil, nil
}

// primary reports whether w is a For watch: its keys are the controller's.
func (w *informerWatch[K, WK, WV]) primary() bool { return w.same != nil }

// primaryValue is a For watch's value of key: the informer's.
func (w *informerWatch[K, WK, WV]) primaryValue(key K) (any, bool) {
	k, ok := any(key).(WK)
	if !ok {
		return nil, false
	}
	v, found := w.inf.Get(k)
	return v, found
}

// enableValues makes the key pages show values (Debug.ShowValues).
func (c *Controller[K]) enableValues() { c.showValues.Store(true) }
