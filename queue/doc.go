// Package queue is the work queue between an informer and a controller's
// workers: it deduplicates keys, delays them, orders them by priority and
// fairness group, and rate-limits retries.
//
// A *Queue[K] implements client-go's workqueue.TypedRateLimitingInterface[K],
// so it drops into any client-go or controller-runtime program unchanged,
// and any client-go rate limiter can be its limiter; yet the package does
// not import client-go (backoff.Limiter has the same method set), so a
// program that does not talk to Kubernetes does not compile it.
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
//   - "Never" is not "now": a delay beyond the clock's range
//     (rate.InfDuration, which a zero-rate token bucket returns, or
//     math.MaxInt64) parks the key, with no timer, until a plain Add or a
//     shorter delay.
//   - Priorities: higher first; FIFO within a priority; merging keeps the
//     higher priority, and a ready key raised to a higher priority goes to
//     the back of that priority's line.
//   - Ageing: priorities are strict only up to the ageing bound
//     (DefaultAgeing, 30s; WithAgeing). A ready key that has waited for the
//     bound is served next, whatever its priority, and keys that have all
//     waited that long are served oldest first; so a steady stream of
//     higher-priority keys cannot starve a lower one. The wait counts from
//     when the key became ready; for a key that became ready while every
//     ready key had its priority, from the first moment keys of another
//     priority were ready too (before that no key could pass it). A key is
//     never served as aged before it has waited for the bound. Under
//     sustained overload, keys older than the bound are therefore served
//     in FIFO order: fresh changes keep their lead over an initial list for
//     as long as the bound.
//   - Fairness: with WithGroup, Get serves the groups within a priority
//     round-robin, one key per group per turn, so one group's flood cannot
//     starve another group.
//   - AddRateLimited waits the rate limiter's When; Forget resets the key's
//     failure count. After ShutDown it neither adds nor counts a failure.
//   - Keys must equal themselves and be hashable: Add and its variants
//     panic, naming the problem, on a key holding a NaN or an interface key
//     holding a slice, map or func, which the queue could never find again.
//   - Metrics (NewMetrics, WithMetrics) outlive queues: a new queue on the
//     same Metrics keeps the counters counting.
//   - ShutDown: adds are ignored; Get hands out what is ready, then reports
//     shutdown. ShutDownWithDrain also waits for keys being processed.
//
// # Cost
//
// No goroutine or timer per key: one goroutine and one timer per queue serve
// all delays, started on the first delayed add and stopped by ShutDown. Add,
// Get and Done are O(1) expected (a hash lookup and list links) plus O(log p)
// for p priorities in use; delayed adds are O(log d) for d delayed keys.
// Steady-state traffic allocates nothing. Ageing reads the clock on adds and
// Gets only while keys of more than one priority are ready, and costs 16
// bytes per key. Metrics cost a clock read and a histogram observation on
// Add, Get and Done; everything else is computed when scraped.
package queue
