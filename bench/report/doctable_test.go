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
	out, ok, err := splice([]byte(doc), "| new |\n")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "# Benchmarks\n\nprose\n\n"+tableBegin+"\n| new |\n"+tableEnd+"\n\nmore prose\n", string(out))

	again, _, err := splice(out, "| newer |")
	require.NoError(t, err)
	assert.Equal(t, "# Benchmarks\n\nprose\n\n"+tableBegin+"\n| newer |\n"+tableEnd+"\n\nmore prose\n", string(again), "splicing is repeatable")
}

func TestSpliceShouldLeaveADocumentWithoutMarkersAloneAndRefuseOneWithBrokenMarkers(t *testing.T) {
	out, ok, err := splice([]byte("no markers\n"), "| t |\n")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, "no markers\n", string(out))

	_, _, err = splice([]byte(tableBegin+"\nno end\n"), "| t |\n")
	assert.ErrorContains(t, err, "only one of the markers")
	_, _, err = splice([]byte(tableEnd+"\n"+tableBegin+"\n"), "| t |\n")
	assert.ErrorContains(t, err, "comes before")
}

func TestWriteTableShouldWriteTheTableFileAndSpliceTheBenchmarksPageWhenItHasMarkers(t *testing.T) {
	root := filepath.Join(t.TempDir(), "bench")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "..", "docs"), 0o755))

	written, err := writeTable(root, "- cpu: X\n\n| t |\n")
	require.NoError(t, err)
	require.Len(t, written, 1, "no docs/benchmarks.md: the table file only")
	data, err := os.ReadFile(filepath.Join(root, tableFile))
	require.NoError(t, err)
	assert.Equal(t, tableHeader+"- cpu: X\n\n| t |\n", string(data))

	page := filepath.Join(root, spliceFile)
	require.NoError(t, os.WriteFile(page, []byte("intro\n"+tableBegin+"\n"+tableEnd+"\n"), 0o644))
	written, err = writeTable(root, "| t2 |\n")
	require.NoError(t, err)
	assert.Len(t, written, 2)
	data, err = os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+tableBegin+"\n"+tableHeader+"| t2 |\n"+tableEnd+"\n", string(data))
}
