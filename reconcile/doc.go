// Package reconcile runs level-triggered controllers: the reconciliation
// loop of Kubernetes (watch → compare → act → repeat) as a library, over any
// store an informer can follow.
//
// A program writes a Reconciler: given a key, it reads the desired state
// (from an informer's cache) and the observed world, and acts on the
// difference. A Controller feeds it keys: its watches turn informer changes
// into keys (For: the primary informer's own keys; Watch: a secondary
// informer's changes mapped to primary keys, by owner, by index or by any
// function; FromFunc and FromChannel: external triggers), a work queue
// deduplicates and orders them, and workers call the reconciler. A Manager
// runs informers and controllers together, with leader election and health,
// readiness and metrics over HTTP. Package reconciletest runs a controller
// against the memory store and a fake clock, and waits until it has settled.
//
// # Contracts
//
//   - Reconcile gets a key, never an event: it reads current state.
//   - One key is never reconciled by two workers at once. A key that changes
//     while it is being reconciled is reconciled once more afterwards.
//   - Every key of every watched informer is reconciled at least once after
//     each start of Run (so after each leadership gain under a Manager),
//     whatever happened while the controller was not running. The informers'
//     initial contents go in at low priority, behind fresh changes.
//   - Outcomes: nil → forget the key's failures; Result.RequeueAfter →
//     reconcile again then; an error → retry with per-key exponential backoff
//     (WithRateLimiter); Terminal(err) → no retry until the key changes; a
//     panic → recovered, logged with its stack, counted and retried like an
//     error; with WithMaxAttempts, a key that failed that many times in a row is
//     parked (Controller.Parked) until it changes, or until Controller.Unpark
//     retries it (a cause outside the store that is gone).
//   - Each reconcile's context carries controller, key and reconcile ID for
//     logging (LoggerFrom), the leader's fencing term under a Manager with
//     leader election (leader.TermFromContext), and is cancelled at the
//     per-reconcile timeout, at shutdown after the grace period, at once when
//     leadership is lost, and with WithCancelOnChange when its key changes.
//   - Run returns only after every goroutine it started has returned.
//   - Bad input (an empty name, a nil reconciler, a nil predicate, zero or
//     more than MaxWorkers workers, a watch or rate limiter of another key
//     type, a duplicate name in a Manager or a metrics registry) is an
//     error from New or Manager.AddInformer, AddController, AddFunc or
//     AddLeaderFunc, never a panic at run time. ByIndex checks its index
//     name when it is called, at start-up.
//   - A panic in a predicate, a key mapping or an enqueue (a key the queue
//     cannot use, such as NaN) is recovered, logged with its stack and
//     counted (converge_watch_panics_total); that one change is dropped and
//     the process goes on.
//
// # Owned children and reading your own writes
//
// Owns watches a child informer (pods of a replica set): every change to a
// child reconciles its owner, old and new, and Owned lists an owner's
// children from the child informer's cache through the index Owns adds
// (one per controller, OwnerIndexOf), so that a reconciler counts its
// children without a store round trip. Any number of controllers may own
// the same child informer; OwnedBy names the relation when several do. ByIndex is the other direction: a referenced object (a node)
// reconciles the primaries that refer to it.
//
// A cache lags the store: a reconcile that created a child and is run again
// before the child informer has the create would create it again. After each
// such write, a reconciler calls Wrote(ctx, childInformer, rev) with the
// revision the store returned; the controller then parks the key instead of
// reconciling it until the informer has seen rev (no failure, no backoff,
// counted in converge_read_your_writes_skips_total, not in
// controller_runtime_reconcile_total), and queues it the moment the informer
// catches up. After WithReadYourWritesTimeout (1 minute) it reconciles anyway
// with a warning, so no key hangs behind an informer that lost its store.
// The check costs one atomic load per reconcile while no key waits.
//
// # The life of a key
//
// Where each stage of a key's way from a change in the store to the
// outcome of its reconcile is written, in the order the key meets them
// (files of this package unless another package is named):
//
//  1. Watch event: the informer applies the store's event to its cache
//     (package informer, reflector.go applyAll and applyLocked), pushes
//     the change to each handler's listener (fanout.go pushAllLocked;
//     notifyLocked after a relist) and calls the handler on that
//     listener's goroutine (listener.go run). A
//     controller's handler is watchHandler (watch.go), whose OnAdd,
//     OnUpdate and OnDelete call informerWatch.deliver.
//  2. Predicates: deliver drops the change unless every predicate of the
//     watch lets it through (given to For, Watch or Owns; IgnoreUnchanged
//     is one).
//  3. Mapping: deliver turns the change into keys: the same key for For;
//     the toKeys function for Watch (ByIndex makes one); the owner
//     function for Owns (owns.go). An update maps the old value too, so a
//     change of owner reconciles both. FromFunc and FromChannel sources
//     skip 1 to 3 and enqueue their keys directly (watch.go
//     funcWatch.start).
//  4. Enqueue: run.enqueue (run.go). A sharded controller drops a key
//     whose bucket this replica does not hold, remembering a fresh change
//     as missed (shard.go sharding.admits); a parked key is unparked
//     (keystate.go keyStates.unpark); with WithCancelOnChange a change
//     cancels the key's reconcile in flight; then the key is added to the
//     queue, at low priority for an initial list.
//  5. Queue: the queue's engine (internal/workqueue, whose public face
//     is package queue) deduplicates, delays and orders keys (queue.go
//     AddWithOptions) and hands each to one worker at a time (reasons.go
//     GetWithReasons, worker.go Done). The delay of a retry comes from the
//     controller's rate limiter (run.go recordingLimiter.When, which
//     notes the retry's time for Controller.Status; WithRateLimiter).
//  6. Worker: run.work (run.go) takes a key from the queue and gives it
//     back with Done; run.process runs the steps 7 to 11.
//  7. Read-your-writes gate: gate.check (wrote.go) holds back, parked and
//     not reconciled, a key whose earlier reconcile reported a write
//     (Wrote, gate.record) that its informer has not seen yet.
//  8. Sharded begin: a sharded controller reconciles a key only while it
//     holds the key's bucket on a valid lease (shard.go sharding.begin,
//     then sharding.end).
//  9. Deadline: run.reconcileContext (deadline.go) makes the reconcile's
//     context, bounded by WithReconcileTimeout and cancellable for
//     WithCancelOnChange.
//  10. Reconcile: run.call (run.go) calls the Reconciler, and turns a
//     panic into an error.
//  11. Settle: run.settle (run.go) acts on the outcome. Success forgets
//     the key's failures (keystate.go keyStates.succeeded) and queues
//     Result.RequeueAfter; a terminal error is recorded and not retried
//     (keyStates.terminal); any other error is counted
//     (keyStates.failed), which parks the key after WithMaxAttempts
//     failures, or else queues it again after its backoff.
//  12. Gate arm and fire: once the worker has given back a key the gate
//     held, gate.arm (wrote.go) registers a callback on the informer it
//     waits for, and gate.fire queues the key when that informer has
//     delivered the revision.
//
// # Metrics
//
// With WithMetrics, a controller exports controller-runtime's metrics, with
// the same names, labels and buckets, so that existing dashboards and alerts
// work: controller_runtime_reconcile_total{controller,result},
// controller_runtime_reconcile_errors_total,
// controller_runtime_terminal_reconcile_errors_total,
// controller_runtime_reconcile_panics_total,
// controller_runtime_reconcile_time_seconds, controller_runtime_active_workers,
// controller_runtime_max_concurrent_reconciles; its queue exports client-go's
// workqueue_* metrics named after the controller. converge adds
// converge_reconcile_parked_keys, converge_watch_panics_total,
// converge_read_your_writes_skips_total,
// converge_read_your_writes_timeouts_total and
// converge_read_your_writes_waiting.
//
// A Manager with a registerer (ManagerOptions.Registerer, or a Gatherer that
// is a *prometheus.Registry) exports, per informer added, labelled informer:
// converge_informer_synced, _cache_size, _last_revision, _head_revision,
// _lag_revisions, _last_event_age_seconds, _stuck, _stalled_seconds,
// _lists_total, _relists_total, _list_errors_total, _watch_errors_total,
// _decode_errors_total, _events_total and _bad_keys. Its /readyz fails while
// an informer has not synced or is stuck (ManagerOptions.StuckAfter).
//
// # Tracing
//
// With WithTracerProvider, each reconcile is an OpenTelemetry span named
// "reconcile <controller>" (attributes controller, key, reconcile.id and
// result; the error recorded), and the reconcile's context carries it, so
// spans the reconciler starts are its children. Only the OpenTelemetry API
// is imported; without the option nothing is traced and nothing is spent.
//
// # Cost
//
// Per reconcile: a queue Get and Done (no allocation), one small allocation
// for the reconcile's context, and with metrics a histogram observation and
// three counter or gauge updates. A key that succeeds costs nothing in the
// failure bookkeeping. A logger with the reconcile's attributes is built only
// when something is logged.
package reconcile
