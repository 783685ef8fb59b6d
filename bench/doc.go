// Package bench compares converge's work queue (package queue) with
// client-go's workqueue (workqueue.NewTypedRateLimitingQueueWithConfig) and
// controller-runtime's priority queue (priorityqueue.New), and converge's
// informer (package informer, fed by informer/memstore) with client-go's
// SharedIndexInformer, side by side: the same pre-generated keys and
// objects, the same workload code and the same machine, in one
// `go test -bench` run. Absolute numbers vary by up to 2x between runs
// on a shared machine; the ratios measured within one run are what the
// report compares.
//
// # Reproduce
//
//	make bench                                   # = go -C bench run ./report
//	BENCH_COUNT=1 go -C bench run ./report       # one run per benchmark instead of 3
//	go -C bench test -run '^$' -bench . -benchtime=1x .   # raw output
//
// bench is a Go module of its own (bench/go.mod, with a replace directive
// pointing at the repository root), so that client-go and controller-runtime
// are its dependencies, not the library's: run its commands in bench/ (or
// with go -C bench), not from the root. The report runs, in bench/,
//
//	go test -run '^$' -bench . -benchtime=1x -count=$BENCH_COUNT .
//
// streaming its output to stderr, and prints a markdown table of the
// median of each metric per queue, the ratios converge/client-go and
// converge/priorityqueue, and whether each target is met, with the Go
// version, GOMAXPROCS, CPU model, the date and the command, and a last
// column naming the Source converge's side was fed by (memstore,
// etcdstore, pgstore, or a diagnostic Source of the benchmark). It also
// writes the report to bench/out/queue.md (not committed), the table
// with the machine and date between the markers <!-- bench:begin --> and
// <!-- bench:end --> of docs/benchmarks.md, and a few of its rows as
// ratios, with the date and machine, between <!-- bench:headline:begin -->
// and <!-- bench:headline:end --> of the README (both committed: the
// documentation's tables are the last run's). A run at BENCH_COUNT=5
// takes about 40 minutes on a 2-core machine: the informer scenarios and
// the leader fail-overs at client-go's default timings (a 15 s lease)
// take most of it.
//
// # What is measured
//
// Each Benchmark function is one scenario, with one sub-benchmark per queue
// (converge, client-go, priorityqueue). All scenarios but RoundTrip are a
// fixed workload per b.N iteration, meant for -benchtime=1x; they report
// custom metrics and suppress ns/op.
//
//  1. Throughput: 8 producers Add their share of 1M distinct keys while 8
//     workers Get+Done until all 1M are done; items/s from the first Add to
//     the last Done. The .../metrics variants give each queue a fresh
//     Prometheus registry: converge through WithMetrics, client-go and the
//     priority queue through a workqueue.MetricsProvider defined here
//     (the seven workqueue_* series of Kubernetes components, with the same
//     histogram buckets as converge). The run fails unless every queue
//     recorded 1M adds and 1M observations in both histograms.
//  2. RoundTrip: Add+Get+Done on one goroutine over 1024 keys; ns/op,
//     allocs/op and B/op over max(b.N, 1Mi) round trips (so -benchtime=1x
//     still measures a million).
//  3. Memory: heap bytes per queued key with 1M distinct keys queued
//     (HeapAlloc after GC before and after the adds, divided by 1M). The keys
//     exist before the first reading, so their own bytes are not counted.
//  4. AddAfter: one producer calls AddAfter for 1M distinct keys with random
//     0-100 ms delays (fixed seed) while 4 workers Get+Done. The due time is
//     read from the clock at each AddAfter call; lateness is the time Get
//     returned the key minus its due time (p50, p99, max in ms); addafter-ns
//     is the producer loop's wall time per call (it includes one clock read,
//     and the waiting for the queue's lock that the workers cause).
//  5. Steady: one producer adds distinct keys at 50k/s for 2 s, each at its
//     slot of a precomputed schedule, while 4 workers Get+Done; add→Get
//     latency p50/p99/p999 in µs, and the achieved rate. The producer
//     sleeps until a key is due and adds every key due: timers here wake
//     about once a millisecond, so the keys come about fifty at a time. A
//     producer that yielded in a loop instead held a processor, and the
//     workers' threads queued behind it for the CPU (1.8 s of runq-wait-ms
//     in a 2 s run, maxima of 1-5 ms on both queues).
//  6. Storm: 4 producers Add 1M times each over the same 1k keys while 4
//     workers Get+Done; the keys the workers received during the storm, the
//     longest any worker waited between two keys (from the storm's start to
//     its end), and the storm's duration.
//
// Scenarios 5 and 12 also report, per repetition, what the host and the
// runtime did to the process meanwhile (hoststall_test.go): stall-max-µs,
// the longest gap between two clock reads of the writer's loop that did
// not sleep between them: it only writes there, so a gap is its own write
// or time its thread was off the CPU (or the world stopped for the GC:
// gc-pause-max-µs, gcs); runq-wait-ms, the time the process's threads
// waited for a CPU; steal-ms. The report leaves out of the max-µs targets
// of scenarios 5 and 12 a repetition that missed while converge's
// stall-max-µs was at least as long as its value, and says how many it
// left out. With BENCH_TRACE_DIR set, a runtime/trace flight
// recorder writes the execution trace of every repetition whose p99.9 is
// above BENCH_TRACE_P999_US (1000 by default) to that directory. Traced at
// a load of 5-14 on 2 cores, a 64 ms p99.9 of scenario 5 was a window in
// which neither of the process's two threads emitted a trace event: the
// writer, spinning on Gosched (an event every few µs), went silent on one
// P, and the thread woken for the other P to run the four readied workers
// started 64 ms later: both threads runnable, neither on a CPU.
//
// Scenarios 7-9 compare informers, with one sub-benchmark per informer and
// size: BenchmarkInformerSync/converge/100k. The sizes are 10k, 100k and 1M
// objects (the whole suite stays well under 10 minutes at BENCH_COUNT=3).
// Each informer has one handler, which only counts: converge's
// informer.New with default options over a memstore.Store keyed by
// "namespace/name"; client-go's NewSharedIndexInformer (no indexers, no
// resync, feature gates at their defaults) over a cache.ListWatch whose list
// returns the same object pointers and whose watch is a
// watch.NewFakeWithChanSize with room for every update, wrapped to report
// IsWatchListSemanticsUnSupported (without that the v0.37 reflector never
// calls the list). The objects are a typed struct (TypeMeta, ObjectMeta and
// a spec of strings, ~560 B of heap each), built before any timing and
// shared by both informers, so no decoding is measured on either side.
//
//  7. InformerSync: time from creating and starting the informer until its
//     handler has been given all N adds (counted; the wait ends on the Nth,
//     not on a quiet period) and the informer and the handler's
//     registration report synced, waited for on channels (WaitForSync,
//     HasSyncedChecker().Done()), not by polling; sync-ms and objects/s,
//     the mean over max(1, 200k/N) syncs per run (20 at 10k, 2 at 100k),
//     each on a fresh source and informer, since a 10k sync takes only a
//     few ms.
//  8. InformerMemory: HeapAlloc after GC before creating the informer (the
//     source and its objects already exist) and after it synced, divided by
//     N: the informer's own overhead per cached object, not the objects.
//     For client-go that includes the namespace/name key it computes per
//     object; converge caches the keys the memory store hands it.
//  9. InformerFanout: after the sync (not timed), 100k updates (new object
//     versions, cycling over the keys: 10 per key at 10k, 1 per key at
//     100k, the first 100k keys at 1M) are pushed through the source
//     (memstore.Store.Put; FakeWatcher.Modify, a channel send) on the
//     benchmark's goroutine, and timed until the handler has been given the
//     final version of every updated key; events/s is 100k over that time.
//     converge may coalesce updates its handler has not been given yet (its
//     contract allows it), so callbacks reports how many OnUpdate calls each
//     handler received; client-go delivers all 100k. converge's time
//     includes its store's writes; client-go's fake watch costs a channel
//     send.
//
// Scenario 10 (BenchmarkLeaderFailover, described on the function) times
// leader fail-over after a crash and after a clean release, per backend
// (memory; etcd and PostgreSQL when their servers' variables are set, see
// internal/chaos), at client-go's default timings and at the shortest ones we
// consider safe, next to client-go's leaderelection over a LeaseLock on the
// fake clientset.
//
// Scenarios 11-12 compare whole controllers: memory store → informer →
// reconcile.Controller, against the informer scenarios' fake ListWatch →
// SharedIndexInformer → client-go workqueue → N workers, and the same
// informer → controller-runtime's controller with default options
// (priority queue, metrics). Every reconciler reads its object from the
// cache without a copy. ReconcileThroughput (11) times 100k listed objects
// until each has been reconciled at least once (a per-key flag, not a
// quiet period), at 1, 4 and 16 workers, and reports its stages beside
// the total: cached-ms, when the informer held the whole list (converge:
// WaitForCache; client-go: the informer's HasSynced, the list popped into
// its indexer and handed to its listeners), and first-ms, when the first
// reconcile started (client-go's workers start once its handler has been
// given every add; converge's once the cache holds the list); beside
// them cpu-ms, the CPU time (user + system, getrusage) the whole process
// used from the start until every key was reconciled, and gcs, the
// garbage collections that ended meanwhile. On a host whose other work
// takes the processors the wall-clock time swings with its load, the CPU
// time much less: compare the two pipelines' cpu-ms where their ns/op
// disagree from one repetition to the next. ReconcileLatency (12) writes 20k
// updates at a paced 10k/s over 10k keys, 4 workers, and measures each
// version from just before its write to the first reconcile that reads it.
// Its writer sleeps between writes and writes what is due when it wakes,
// about ten at a time (timers here wake about once a millisecond), so
// that it leaves the processors to the pipeline under test.
//
// The stores' rows (13-17, 19, 21) run against the servers make bench
// starts. PgstoreTableToInformer (15) is the path of a program or psql
// writing a table that pgstore follows: plain INSERTs at 500/s from a pool
// with no pgstore DB, the table's trigger's NOTIFY waking the informer's
// reader. informer/pgstore's BenchmarkStages/table splits the same path
// into its stages (commit, wake, query, emit, handler).
//
// The objects of one size are built once and reused by the consecutive
// runs of one sub-benchmark; only one size is kept alive at a time. Each
// run builds a fresh source and informer and stops them after; a run fails
// if either informer relisted or rewatched.
//
// Keys look like "namespace-17/object-123456" and are generated once, before
// any timing. Workers do nothing but Get, Done and, where a latency is
// measured, read the clock. No queue gets options the others lack: metrics
// are off except in the .../metrics variants, and the rate limiters are each
// queue's default (client-go's default controller rate limiter), unused by
// these scenarios. Every scenario is bounded by a timeout, shuts its queue
// down and waits for its goroutines; TestMain fails the run on a leaked
// goroutine. The tests in this package check that every queue satisfies the
// contract the scenarios rely on and registers the same metric families.
package bench
