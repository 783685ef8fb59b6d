// Package events records what a controller did to a key, for people: an
// event recorder used as Kubernetes' EventRecorder is ("Created pod: web-x7k2p",
// "Back-off restarting failed process"), whose events a describe view and the
// debug pages show next to the key.
//
// A reconciler calls Recorder.Event or Recorder.Eventf with the key it
// reconciles, a Type (Normal or Warning), a short machine-readable reason in
// UpperCamelCase and a message. The recorder:
//
//   - Counts repeats instead of keeping them: an event with the same key,
//     type, reason and message as one it holds updates that event's Count and
//     Last, and is handed to the sinks again with the new count. A hot loop
//     that records the same failure a million times is one event, counted.
//   - Rate-limits new events per key with a token bucket on its clock
//     (WithRateLimit; default a burst of 25, then one per 10 seconds), so a
//     hot loop whose messages differ each time cannot flood a key, the
//     memory or a store. A repeat costs no token. A limited event is dropped
//     and counted in Stats.
//   - Stays bounded: it correlates at most WithMaxKeys keys (least recently
//     used evicted, with their rate limits) and MaxEventsPerKey events a key.
//
// Sinks receive the deduplicated events: MemorySink keeps the newest events
// of each key for a page or a test; StoreSink writes them, asynchronously
// and coalesced, to any informer.Store, so that another process (a CLI, a
// dashboard) can read them. Both keep, of two versions of one event, the one
// with the larger Count, so versions reaching them out of order never move a
// count back. Both are bounded too: MemorySink by its key limit, StoreSink
// with Kubernetes' retention (a TTL of an hour by default, at most
// MaxEventsPerKey records a key, and a key's records deleted with it when
// the program says it is gone: StoreSink.DeleteKey, DeletionHandler).
//
// Events are not a log and not state: a controller must never read them to
// decide anything. A nil *Recorder records nothing, so a reconciler can hold
// an optional one.
package events
