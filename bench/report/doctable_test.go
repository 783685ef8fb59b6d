package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpliceShouldReplaceOnlyWhatLiesBetweenTheMarkers(t *testing.T) {
	doc := "# Benchmarks\n\nprose\n\n" + tableBegin + "\nold table\n" + tableEnd + "\n\nmore prose\n"
	out, ok, err := splice([]byte(doc), tableBegin, tableEnd, "| new |\n")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "# Benchmarks\n\nprose\n\n"+tableBegin+"\n| new |\n"+tableEnd+"\n\nmore prose\n", string(out))

	again, _, err := splice(out, tableBegin, tableEnd, "| newer |")
	require.NoError(t, err)
	assert.Equal(t, "# Benchmarks\n\nprose\n\n"+tableBegin+"\n| newer |\n"+tableEnd+"\n\nmore prose\n", string(again), "splicing is repeatable")
}

func TestSpliceShouldLeaveADocumentWithoutMarkersAloneAndRefuseOneWithBrokenMarkers(t *testing.T) {
	out, ok, err := splice([]byte("no markers\n"), tableBegin, tableEnd, "| t |\n")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, "no markers\n", string(out))

	_, _, err = splice([]byte(tableBegin+"\nno end\n"), tableBegin, tableEnd, "| t |\n")
	assert.ErrorContains(t, err, "only one of the markers")
	_, _, err = splice([]byte(tableEnd+"\n"+tableBegin+"\n"), tableBegin, tableEnd, "| t |\n")
	assert.ErrorContains(t, err, "comes before")
}

func TestWriteTableShouldSpliceTheBenchmarksPageAndFailWithoutItsMarkers(t *testing.T) {
	root := filepath.Join(t.TempDir(), "bench")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "..", "docs"), 0o755))

	_, err := writeTable(root, "| t |\n")
	assert.ErrorContains(t, err, "no "+tableBegin, "no docs/benchmarks.md: the table would be lost")

	page := filepath.Join(root, spliceFile)
	require.NoError(t, os.WriteFile(page, []byte("intro\n"), 0o644))
	_, err = writeTable(root, "| t |\n")
	assert.ErrorContains(t, err, "no "+tableBegin)

	require.NoError(t, os.WriteFile(page, []byte("intro\n"+tableBegin+"\n"+tableEnd+"\n"), 0o644))
	written, err := writeTable(root, "| t2 |\n")
	require.NoError(t, err)
	assert.Equal(t, []string{page}, written)
	data, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+tableBegin+"\n"+tableHeader+"| t2 |\n"+tableEnd+"\n", string(data))
}
