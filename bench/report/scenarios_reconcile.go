package main

import "fmt"

// controllerRuntime is the third pipeline of the controller rows
// (BenchmarkReconcileThroughput and BenchmarkReconcileLatency in package
// bench). It shares the table's third column with priorityQueue, which
// only the queue rows have.
const controllerRuntime = "controller-runtime"

// reconcileWorkers are the worker counts of BenchmarkReconcileThroughput
// (.../converge/workers=4).
var reconcileWorkers = []string{"1", "4", "16"}

// The controller rows (scenarios 11-12): store → informer → controller,
// for converge, client-go and controller-runtime. Declared in a file of
// their own, after the leader rows.
func init() {
	for _, w := range reconcileWorkers {
		name := "ReconcileThroughput/workers=" + w
		Targets[Key{name, "objects/s"}] = Target{"≥ 2x client-go", []check{vs(clientGo, ">=", 2)}}
		Targets[Key{name, "ns/op"}] = Target{"≤ 0.35x client-go", []check{vs(clientGo, "<=", 0.35)}}
		Scenarios = append(Scenarios, Scenario{name,
			fmt.Sprintf("11. controller: 100k stored objects listed and each reconciled once, %s workers", w), srcMemstore})
	}
	Targets[Key{"ReconcileThroughput1M", "ns/op"}] = Target{"≤ 0.3x client-go", []check{vs(clientGo, "<=", 0.3)}}
	Scenarios = append(Scenarios, Scenario{"ReconcileThroughput1M",
		"11. controller: 1M stored objects listed and each reconciled once, 4 workers", srcMemstore})
	// The latency target: in the median and in at least 4 of 5 reps. A
	// stall of the writer's thread explains a maximum, not a p99: the
	// writer's stalls (tens to hundreds of µs once it sleeps between
	// writes) are as long as the p99s themselves.
	Targets[Key{"ReconcileLatency", "p99-µs"}] = Target{"≤ 0.5x client-go, and in all reps but one at most",
		[]check{vs(clientGo, "<=", 0.5).inAllRepsButOne()}}
	Targets[Key{"ReconcileLatency", "max-µs"}] = Target{"≤ 1x client-go, and in all reps but one at most",
		[]check{vs(clientGo, "<=", 1).inAllRepsButOne().exceptHostStalls()}}
	Targets[Key{"ReconcileLatency", "p999-µs"}] = Target{"≤ 0.7x client-go, and in all reps but one at most",
		[]check{vs(clientGo, "<=", 0.7).inAllRepsButOne()}}
	Scenarios = append(Scenarios, Scenario{"ReconcileLatency",
		"12. controller: store write → reconcile start, steady 10k writes/s for 2 s, 4 workers", srcMemstore})
}
