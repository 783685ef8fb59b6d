package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The report runs the benchmarks in the bench module and writes next to its
// go.mod: make bench runs it there. The library's module has none of the
// benchmarks' dependencies, so running there must be an error that says
// where to run instead.
func TestModuleRootIsTheBenchModule(t *testing.T) {
	root, err := moduleRoot() // go test runs in bench/report
	require.NoError(t, err)
	assert.Equal(t, "bench", filepath.Base(root))
	assert.FileExists(t, filepath.Join(root, "go.mod"))

	t.Chdir(filepath.Dir(root)) // the repository root: the library's module
	_, err = moduleRoot()
	assert.ErrorContains(t, err, "go -C bench run ./report")
}
