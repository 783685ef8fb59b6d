package events

import (
	"hash/fnv"
	"strconv"
	"time"
	"unicode/utf8"
)

// Type is an event's severity, as in Kubernetes: Normal for what went as
// intended, Warning for what someone may need to look at.
type Type string

const (
	// Normal: something went as intended (a pod created, a process started).
	Normal Type = "Normal"
	// Warning: something failed or is not as intended (a create refused, a
	// process crash-looping).
	Warning Type = "Warning"
)

// Valid reports whether t is Normal or Warning; the recorder drops events
// of any other type (Stats.Invalid).
func (t Type) Valid() bool { return t == Normal || t == Warning }

// Event is one deduplicated event: every call with the same Source, Key,
// Type, Reason and Message that the recorder still correlated is counted in
// it. It is a plain value: the JSON field names are its stored form in a
// StoreSink.
type Event struct {
	// ID identifies the event across processes and sinks: a hash of
	// Source, Key, Type, Reason and Message (see EventID).
	ID string `json:"id"`
	// Key is the key of the object the event is about (Kubernetes'
	// regarding object): for a controller of non-string keys, fmt.Sprint
	// of the key.
	Key string `json:"key"`
	// Source names the component that recorded it, e.g.
	// "replicaset-controller" (Kubernetes' reportingController).
	Source string `json:"source"`
	// Type is Normal or Warning.
	Type Type `json:"type"`
	// Reason is short, machine-readable and UpperCamelCase:
	// "SuccessfulCreate", "FailedCreate", "BackOff".
	Reason string `json:"reason"`
	// Message is for people; the recorder truncates it (see
	// WithMaxMessageBytes).
	Message string `json:"message"`
	// Count is how many times it was recorded, at least 1.
	Count int `json:"count"`
	// First and Last are when it was first and last recorded, by the
	// recorder's clock.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// ReconcileID is the ID of the reconcile that last recorded it, if the
	// recorder has WithContextID and the context carried one.
	ReconcileID string `json:"reconcileID,omitempty"`
}

// Equal reports whether e and o are the same version of an event. It
// compares times with time.Time.Equal, so that a version read back from a
// store (without a monotonic clock reading) equals the one written, and the
// store sink's update writes nothing when nothing changed.
func (e Event) Equal(o Event) bool {
	return e.ID == o.ID && e.Key == o.Key && e.Source == o.Source && e.Type == o.Type &&
		e.Reason == o.Reason && e.Message == o.Message && e.Count == o.Count &&
		e.First.Equal(o.First) && e.Last.Equal(o.Last) && e.ReconcileID == o.ReconcileID
}

// newer reports whether e is a later version of the same event than o: a
// larger count, or the same count seen later.
func (e Event) newer(o Event) bool {
	return e.Count > o.Count || (e.Count == o.Count && e.Last.After(o.Last))
}

// EventID returns the ID of the event with these fields: 16 hex digits of
// their 64-bit FNV-1a hash, stable across processes and versions. Two
// different events share an ID with a probability of about n²/2⁶⁵ for n
// events, negligible at the recorder's bounds.
func EventID(source, key string, typ Type, reason, message string) string {
	h := fnv.New64a()
	for _, s := range [...]string{source, key, string(typ), reason, message} {
		h.Write([]byte(s))
		h.Write([]byte{0}) // so that ("ab", "c") and ("a", "bc") differ
	}
	id := strconv.FormatUint(h.Sum64(), 16)
	for len(id) < 16 {
		id = "0" + id
	}
	return id
}

// truncate cuts s to at most max bytes without splitting a UTF-8 sequence,
// marking the cut with "…" (within max; without it if max is below its 3
// bytes).
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	mark := "…"
	if max < len(mark) {
		mark = ""
	}
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
