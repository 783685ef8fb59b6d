// Command dirsync keeps a directory's files matching a manifest: the
// reconciliation loop against something real outside any store. Both sides
// are polled (informer/poll): the manifest, a JSON object from file name to
// content, is the desired state; the directory is the observed state. A file
// that is missing, edited or unlisted is put right within a poll interval; a
// file that cannot be written is retried with per-key exponential backoff,
// under an overall retry rate limit.
//
//	go run ./examples/dirsync -manifest manifest.json -dir out/
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
	"github.com/converge-go/converge/reconcile"
)

// File is one file: in the manifest, what it should hold; on disk, what it
// holds.
type File struct {
	Name    string
	Content string
}

func main() {
	manifest := flag.String("manifest", "manifest.json", "JSON object: file name -> content")
	dir := flag.String("dir", "out", "directory to keep matching the manifest")
	interval := flag.Duration("interval", time.Second, "how often to poll the manifest and the directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, m, err := build(*manifest, *dir, *interval, slog.Default())
	if err == nil {
		err = m.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// build wires two polling informers, the controller and a Manager.
func build(manifest, dir string, interval time.Duration, log *slog.Logger) (*reconcile.Controller[string], *reconcile.Manager, error) {
	byName := func(f File) string { return f.Name }
	same := poll.WithEqual(func(a, b File) bool { return a == b })
	every := poll.WithInterval(interval)
	manifestSrc, err := poll.New(func(context.Context) ([]File, error) {
		return readManifest(manifest)
	}, byName, same, every)
	if err != nil {
		return nil, nil, err
	}
	desired, err := informer.New("manifest", manifestSrc, informer.WithLogger(log),
		// Polls can miss a change: a file written and deleted between two
		// polls of the directory produces no event at all. A resync hands
		// every listed file to the controller again now and then, which
		// checks the disk itself.
		informer.WithResync(10*interval))
	if err != nil {
		return nil, nil, err
	}
	dirSrc, err := poll.New(func(context.Context) ([]File, error) {
		return readDir(dir)
	}, byName, same, every)
	if err != nil {
		return nil, nil, err
	}
	observed, err := informer.New("directory", dirSrc, informer.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}

	c, err := reconcile.New("dirsync", reconcile.Func(func(ctx context.Context, name string) (reconcile.Result, error) {
		want, listed := desired.Get(name)
		path := filepath.Join(dir, name)
		have, err := os.ReadFile(path) // the world, not the cache: act on what is there now
		exists := err == nil
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return reconcile.Result{}, err
		case !listed && exists:
			reconcile.LoggerFrom(ctx).Info("removing unlisted file")
			return reconcile.Result{}, os.Remove(path)
		case listed && (!exists || string(have) != want.Content):
			reconcile.LoggerFrom(ctx).Info("writing file", "existed", exists)
			return reconcile.Result{}, writeAtomically(path, want.Content)
		}
		return reconcile.Result{}, nil
	}),
		reconcile.For(desired),
		reconcile.Watch(observed, func(name string, _ File) []string { return []string{name} }),
		// A file that cannot be written is retried after 100ms, 200ms, … up
		// to a minute; all files together are retried at most 20 times a
		// second, so a broken disk does not turn into a busy loop.
		reconcile.WithRateLimiter(backoff.Max(
			backoff.NewPerKey[string](backoff.Exponential{Base: 100 * time.Millisecond, Cap: time.Minute}),
			backoff.NewBucket[string](rate.Limit(20), 20, nil),
		)),
		reconcile.WithLogger(log),
	)
	if err != nil {
		return nil, nil, err
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "off", Logger: log})
	if err != nil {
		return nil, nil, err
	}
	// The Manager runs the informers c watches (desired, observed) too.
	if err := m.AddController(c); err != nil {
		return nil, nil, err
	}
	return c, m, nil
}

func readManifest(path string) ([]File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var files map[string]string
	if err := json.Unmarshal(b, &files); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	out := make([]File, 0, len(files))
	for name, content := range files {
		out = append(out, File{Name: name, Content: content})
	}
	return out, nil
}

func readDir(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed between the listing and the read
		}
		out = append(out, File{Name: e.Name(), Content: string(b)})
	}
	return out, nil
}

// writeAtomically writes through a temporary file and a rename, so that a
// reader (or a poll) never sees half a file.
func writeAtomically(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
