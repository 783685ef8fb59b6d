package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestARunRedrawnFromItsSavedOutputShouldKeepItsCommandDurationDateAndNote(t *testing.T) {
	ran := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	saved := savedHeader("go test -bench . -count=5 .", 39*time.Minute, ran) +
		"report-note: row 5 measured again\ncpu: AMD EPYC\nBenchmarkRoundTrip/converge-2 1 100 ns/op\n"
	path := filepath.Join(t.TempDir(), "bench.txt")
	require.NoError(t, os.WriteFile(path, []byte(saved), 0o644))

	res, err := Parse(strings.NewReader(saved))
	require.NoError(t, err)
	command, took, when := savedRun(res, path)
	assert.Equal(t, "go test -bench . -count=5 .", command)
	assert.Equal(t, 39*time.Minute, took)
	assert.True(t, ran.Equal(when), "date %v, want %v", when, ran)
	body := renderBody(res, command, "5", took, nil, when)
	assert.Contains(t, body, "- command: `go test -bench . -count=5 .` (took 39m0s)")
	assert.Contains(t, body, "- date: 2026-03-04T05:06:07Z")
	assert.Contains(t, body, "- note: row 5 measured again")
	assert.Contains(t, body, "| 2. Add+Get+Done, one goroutine | ns/op | 100.0 |", "the saved rows are read as before")
}

func TestARunSavedWithoutAHeaderShouldSayItWasRedrawnAndTakeTheFilesDate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.txt")
	require.NoError(t, os.WriteFile(path, []byte("BenchmarkRoundTrip/converge-2 1 100 ns/op\n"), 0o644))
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, os.Chtimes(path, mtime, mtime))
	res, err := Parse(strings.NewReader("BenchmarkRoundTrip/converge-2 1 100 ns/op\n"))
	require.NoError(t, err)
	command, took, when := savedRun(res, path)
	assert.Equal(t, "(saved) "+path, command)
	assert.Zero(t, took)
	assert.True(t, mtime.Equal(when))
	assert.NotContains(t, renderBody(res, command, "1", took, nil, when), "- note:")
}
