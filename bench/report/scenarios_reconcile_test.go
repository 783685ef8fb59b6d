package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const reconcileSample = `BenchmarkReconcileThroughput/converge/workers=1-2         	       1	 180660402 ns/op	    553525 objects/s
BenchmarkReconcileThroughput/converge/workers=4-2         	       1	 121878264 ns/op	    820491 objects/s
BenchmarkReconcileThroughput/client-go/workers=1-2        	       1	 316660475 ns/op	    315796 objects/s
BenchmarkReconcileThroughput/client-go/workers=4-2        	       1	 316727580 ns/op	    315729 objects/s
BenchmarkReconcileThroughput/controller-runtime/workers=1-2         	       1	 956199909 ns/op	    104581 objects/s
BenchmarkReconcileLatency/converge-2                                	       1	         0 coalesced	         2.714 p50-µs	       467.0 p99-µs	      2373 p999-µs	     10319 writes/s
BenchmarkReconcileLatency/client-go-2                               	       1	         0 coalesced	         4.657 p50-µs	      3487 p99-µs	      6433 p999-µs	     10514 writes/s
BenchmarkReconcileLatency/controller-runtime-2                      	       1	         0 coalesced	         6.590 p50-µs	      6519 p99-µs	     12910 p999-µs	     10547 writes/s
BenchmarkLeaderFailover/converge/memory/release/short-2    	       1	        51.77 ms/failover
BenchmarkThroughput/priorityqueue-2  	       1	    412185 items/s
`

func TestReconcileRowsShouldFollowTheLeaderRowsWithControllerRuntimeInTheThirdColumn(t *testing.T) {
	res, err := Parse(strings.NewReader(reconcileSample))
	require.NoError(t, err)
	assert.Equal(t, 553525.0, res.Value(Key{"ReconcileThroughput/workers=1", "objects/s"}, converge))
	assert.Equal(t, 104581.0, res.Value(Key{"ReconcileThroughput/workers=1", "objects/s"}, controllerRuntime))
	rows := res.Rows()
	assert.Equal(t, Key{"Throughput", "items/s"}, rows[0], "queue rows first")
	assert.Equal(t, "LeaderFailover/memory/release/short", rows[1].Scenario, "then the leader rows")
	assert.Equal(t, Key{"ReconcileThroughput/workers=1", "ns/op"}, rows[2])
	assert.Equal(t, Key{"ReconcileLatency", "writes/s"}, rows[len(rows)-1])

	table, met, total := res.Table()
	assert.Contains(t, table, "| 11. controller: 100k stored objects listed and each reconciled once, 1 workers | objects/s | 553525 | 315796 | 104581 | 1.75x | 5.29x | ≥ 2x client-go | no |")
	assert.Contains(t, table, "| 11. controller: 100k stored objects listed and each reconciled once, 4 workers | objects/s | 820491 | 315729 | — | 2.60x | — | ≥ 2x client-go | yes |")
	assert.Contains(t, table, "| 12. controller: store write → reconcile start, steady 10k writes/s for 2 s, 4 workers | p99-µs | 467.0 | 3487 | 6519 | 0.13x | 0.072x | ≤ 0.5x client-go, and in all reps but one at most | yes |")
	assert.Contains(t, table, "4 workers | ns/op | 121878264 | 316727580 | — | 0.38x | — | ≤ 0.35x client-go | no |")
	assert.Contains(t, table, "| 1. throughput, 8 producers / 8 workers, 1M keys | items/s | — | — | 412185 |", "the queue rows keep the priority queue in the third column")
	assert.Contains(t, table, "| ≤ 0.35x client-go | no |  | memstore |", "each row names converge's Source")
	assert.Equal(t, 7, total, "Throughput (n/a), two reconcile throughputs and their times, the latency p99 and p99.9")
	assert.Equal(t, 3, met, "4 workers' objects/s, p99, p99.9")
}
