package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeManifest(t *testing.T, path string, files map[string]string) {
	t.Helper()
	b, err := json.Marshal(files)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// dirState reads the directory as a map, as the test's ground truth.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := readDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range files {
		out[f.Name] = f.Content
	}
	return out
}

func TestTheDirectoryIsKeptMatchingTheManifestAndUnwritableFilesBackOff(t *testing.T) {
	root := t.TempDir()
	manifest, dir := filepath.Join(root, "manifest.json"), filepath.Join(root, "out")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("not in the manifest"), 0o644))
	want := map[string]string{"a.txt": "alpha", "b.txt": "beta"}
	writeManifest(t, manifest, want)

	const interval = 20 * time.Millisecond
	c, m, err := build(manifest, dir, interval, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	converged := func(want map[string]string) func() bool {
		return func() bool { return assert.ObjectsAreEqual(want, dirState(t, dir)) }
	}

	require.Eventually(t, converged(want), 10*time.Second, 5*time.Millisecond, "missing files written, the stray one removed")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("edited by hand"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, "b.txt")))
	require.Eventually(t, converged(want), 10*time.Second, 5*time.Millisecond, "drift in the directory is put right")

	want["c.txt"] = "gamma"
	delete(want, "a.txt")
	writeManifest(t, manifest, want)
	require.Eventually(t, converged(want), 10*time.Second, 5*time.Millisecond, "manifest changes are applied")

	// A directory where a file should be: the write fails and is retried
	// with growing delays until the obstacle goes.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d.txt"), 0o755))
	want["d.txt"] = "delta"
	writeManifest(t, manifest, want)
	require.Eventually(t, func() bool {
		st, failing := c.Status("d.txt")
		return failing && st.Attempts >= 3
	}, 10*time.Second, 5*time.Millisecond)
	st, _ := c.Status("d.txt")
	assert.ErrorContains(t, st.LastError, "is a directory")
	assert.False(t, st.NextRetry.IsZero())
	require.NoError(t, os.Remove(filepath.Join(dir, "d.txt")))
	require.Eventually(t, converged(want), 10*time.Second, 5*time.Millisecond, "retried after the obstacle is gone")
	assert.Eventually(t, func() bool { _, failing := c.Status("d.txt"); return !failing }, 10*time.Second, time.Millisecond,
		"a success clears the failures")
}
