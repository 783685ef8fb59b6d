package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const headlineSample = `cpu: AMD EPYC
BenchmarkThroughput/converge-2 1 3000000 items/s
BenchmarkThroughput/client-go-2 1 1000000 items/s
BenchmarkThroughput/priorityqueue-2 1 250000 items/s
BenchmarkReconcileLatency/converge-2 1 20 p50-µs 100 p99-µs 300 max-µs
BenchmarkReconcileLatency/client-go-2 1 50 p50-µs 200 p99-µs 250 max-µs
BenchmarkReconcileLatency/controller-runtime-2 1 80 p50-µs 400 p99-µs 600 max-µs
BenchmarkReconcileBurst/converge-2 1 100 drain-ms
BenchmarkReconcileBurst/client-go-2 1 400 drain-ms
`

func TestTheHeadlineShouldGiveEachRowsRatiosWithTheRunsDateAndMachine(t *testing.T) {
	res, err := Parse(strings.NewReader(headlineSample))
	require.NoError(t, err)
	h := headline(res, "5", time.Date(2026, 1, 2, 23, 0, 0, 0, time.UTC))

	assert.Contains(t, h, "| queue throughput, 8 producers / 8 workers, 1M keys (items/s) | 3.00x | 12.00x (its priority queue) | none (queue alone) |")
	assert.Contains(t, h, "| controller: store write → reconcile start at 10k writes/s, p50 / p99 / max | 0.40x / 0.50x / 1.20x | 0.25x / 0.25x / 0.50x | memstore |")
	assert.Contains(t, h, "| burst of 200k updates over 10k keys, time to drain | 0.25x | — | memstore (Puts) |")
	assert.Contains(t, h, "| informer initial sync, 100k objects (objects/s) | — | — | memstore |", "a row the run lacks shows dashes")
	_, met, total := res.Table()
	assert.Contains(t, h, "Medians of 5 repetitions, from the run of 2026-01-02 on AMD EPYC, GOMAXPROCS 2;")
	assert.Contains(t, h, fmt.Sprintf(" %d of its %d targets met.", met, total))
}

func TestWriteHeadlineShouldSpliceTheREADMEOnlyBetweenItsMarkers(t *testing.T) {
	root := filepath.Join(t.TempDir(), "bench")
	require.NoError(t, os.MkdirAll(root, 0o755))
	written, err := writeHeadline(root, "| h |\n")
	require.NoError(t, err)
	assert.Empty(t, written, "no README: nothing written")

	readme := filepath.Join(root, headlineFile)
	require.NoError(t, os.WriteFile(readme, []byte("# converge\n"+headlineBegin+"\nold\n"+headlineEnd+"\nrest\n"), 0o644))
	written, err = writeHeadline(root, "| h |\n")
	require.NoError(t, err)
	assert.Equal(t, []string{readme}, written)
	data, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Equal(t, "# converge\n"+headlineBegin+"\n"+tableHeader+"| h |\n"+headlineEnd+"\nrest\n", string(data))
}
