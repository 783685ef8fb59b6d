// Package workqueue is the engine of package queue: the deduplicating,
// delaying, prioritised, rate-limited work queue, with the seams that
// package reconcile needs and that a queue user does not.
//
// Package queue is its public face: a queue.Queue[K] holds a Queue[K] and
// forwards the client-go interface, AddWithOptions, Stats and Idle to it;
// the contracts written in queue's package documentation are this
// package's. Package reconcile and the debug pages use this package
// directly, for what the public face leaves out:
//
//   - Reasons (WithReasons, AddOptions.Reason, GetWithReasons): why a key
//     was queued, merged as adds coalesce, handed to the worker that takes
//     it.
//   - AddUnlessProcessing: a wake-up that a worker holding the key fulfils
//     by itself (the read-your-writes gate).
//   - Inspect, Peek and WithReadyTimes: one key's state, the next keys Get
//     would hand out, and ready times without metrics, for debug pages.
//
// Each of these grows with reconcile's needs, which is why they are kept
// out of queue's API: there, whatever is exported is a promise to every
// program that imports it.
//
// Nothing here knows about informers or controllers; the package imports
// only backoff from this module (internal/deps checks it).
package workqueue
