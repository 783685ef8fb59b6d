// Package queue is the work queue between an informer and a controller's
// workers: it deduplicates keys, delays them, orders them by priority and
// fairness group, and rate-limits retries.
//
// A *Queue[K] implements client-go's workqueue.TypedRateLimitingInterface[K],
// so it drops into any client-go or controller-runtime program unchanged.
//
// # Contracts
//
//   - A key is never handed to two workers at once: between Get returning it
//     and Done, no other Get returns it.
//   - Adding a key that is already ready is a no-op (but for raising its
//     priority); adding a key that is being processed makes it run exactly
//     once more, after Done, at the priority of that re-add.
//   - Delays: AddAfter keeps the earliest requested time. A plain Add of a
//     key that waits for a delay makes it ready now, once (client-go's
//     delaying queue would process it twice). A delayed add of a key that is
//     ready, or will be ready again after Done, only merges its priority.
//     Due keys come out earliest first; keys due at the same time, in the
//     order their times were set. A key is ready from its due time on,
//     whether or not anything has moved it yet (ShutDown included).
//   - Priorities: higher first; FIFO within a priority; merging keeps the
//     higher priority, and a ready key raised to a higher priority goes to
//     the back of that priority's line. Priorities are strict: a steady
//     stream of higher-priority keys delays lower ones indefinitely, which is
//     what PriorityLow is for (an informer's initial list must not hold up
//     fresh changes).
//   - Fairness: with WithGroup, Get serves the groups within a priority
//     round-robin, one key per group per turn, so one group's flood cannot
//     starve another group.
//   - AddRateLimited waits the rate limiter's When; Forget resets the key's
//     failure count. After ShutDown it neither adds nor counts a failure.
//   - ShutDown: adds are ignored; Get hands out what is ready, then reports
//     shutdown. ShutDownWithDrain also waits for keys being processed.
//
// # Cost
//
// No goroutine or timer per key: one goroutine and one timer per queue serve
// all delays, started on the first delayed add and stopped by ShutDown. Add,
// Get and Done are O(1) expected (a hash lookup and list links) plus O(log p)
// for p priorities in use; delayed adds are O(log d) for d delayed keys.
// Steady-state traffic allocates nothing. Metrics cost two histogram
// observations per key; everything else is computed when scraped.
package queue
