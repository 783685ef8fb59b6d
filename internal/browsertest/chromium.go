// Package browsertest loads pages in a real browser for tests: Debian's
// Chromium, run headless as one short-lived process per page, with no driver
// library and nothing downloaded. Its test loads the Manager's debug pages
// (reconcile.DebugOptions) with a controller in a realistic state, checks
// what the browser rendered, and can refresh the screenshots in docs/operating.md.
//
// scripts/servers.sh installs Chromium (apt-get install chromium) and names
// the binary in CONVERGE_CHROMIUM; `make test` runs it. Without a browser
// the tests are skipped with a message, unless CONVERGE_INTEGRATION=1, in
// which case they fail, as a missing etcd or PostgreSQL does (package
// internal/testserver).
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/testserver"
)

// ChromiumEnv names the Chromium binary (written by scripts/servers.sh).
// When unset, Find looks for chromium and chromium-browser on PATH.
const ChromiumEnv = "CONVERGE_CHROMIUM"

// DefaultTimeout bounds each Chromium run when Browser.Timeout is zero. It
// is generous on purpose: a cold start of Chromium on a loaded 2-core
// machine takes seconds, and a test that waits too little is a flake.
const DefaultTimeout = 2 * time.Minute

// Browser runs headless Chromium. Each call starts a fresh process with a
// fresh profile, so calls share no state (cookies, cache, a profile lock)
// and may run concurrently.
type Browser struct {
	// Path is the Chromium binary.
	Path string
	// Dir holds the profiles and the files each run writes; Find uses the
	// test's t.TempDir().
	Dir string
	// Timeout bounds one run; the process group is killed when it expires.
	// Default (zero): DefaultTimeout.
	Timeout time.Duration
}

// Find returns a Browser for t: the binary CONVERGE_CHROMIUM names, else
// chromium or chromium-browser on PATH. Without one it skips t with a
// message saying how to get one, or fails t under CONVERGE_INTEGRATION=1.
func Find(t testing.TB) *Browser {
	t.Helper()
	path, err := lookChromium()
	if err != nil {
		if testserver.Integration() {
			t.Fatalf("%s=1 but %v. Run `make test` (scripts/servers.sh installs it with apt-get).",
				testserver.IntegrationEnv, err)
		}
		t.Skipf("SKIPPED BROWSER TEST: %v. Run `make test`, or `apt-get install chromium`; "+
			"set %s=1 to make this a failure.", err, testserver.IntegrationEnv)
	}
	return &Browser{Path: path, Dir: t.TempDir()}
}

// lookChromium finds the binary, as Find documents.
func lookChromium() (string, error) {
	if p := strings.TrimSpace(os.Getenv(ChromiumEnv)); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%q is not an executable: %w", ChromiumEnv, p, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no Chromium: %s is not set and neither chromium nor chromium-browser is on PATH", ChromiumEnv)
}

// Page is what Chromium rendered of one URL.
type Page struct {
	// DOM is the document as Chromium serialises it once the page has
	// loaded: as rendered, after any script ran.
	DOM string
	// PNG is the screenshot of the viewport.
	PNG []byte
}

// Load loads url in a window of width × height CSS pixels at a device scale
// of 1 and returns its DOM and a screenshot, from one Chromium run.
func (b *Browser) Load(ctx context.Context, url string, width, height int) (Page, error) {
	if width <= 0 || height <= 0 {
		return Page{}, fmt.Errorf("browsertest: load %s in %dx%d: width and height must be positive", url, width, height)
	}
	dir, err := os.MkdirTemp(b.Dir, "load-")
	if err != nil {
		return Page{}, err
	}
	file := filepath.Join(dir, "page.png")
	dom, err := b.run(ctx, dir, url, "--dump-dom", "--screenshot="+file,
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--hide-scrollbars")
	if err != nil {
		return Page{}, err
	}
	png, err := os.ReadFile(file)
	if err != nil {
		return Page{}, fmt.Errorf("browsertest: chromium loaded %s but wrote no screenshot: %w", url, err)
	}
	return Page{DOM: string(dom), PNG: png}, nil
}

// run starts Chromium on url with the common flags and args, with home as
// its home and profile, in a process group of its own; waits for it under
// the timeout; kills whatever of the group is left (renderer and helper
// processes) however it ended; and returns its standard output.
func (b *Browser) run(ctx context.Context, home, url string, args ...string) ([]byte, error) {
	timeout := b.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	flags := []string{
		"--headless",
		"--user-data-dir=" + filepath.Join(home, "profile"),
		"--disable-gpu",
		// /dev/shm is small in containers; Chromium then crashes renderers.
		"--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions", "--disable-default-apps",
		"--disable-crash-reporter", "--disable-breakpad",
		"--no-proxy-server", "--mute-audio",
		"--force-device-scale-factor=1",
	}
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox.
		flags = append(flags, "--no-sandbox")
	}
	cmd := exec.CommandContext(ctx, b.Path, append(append(flags, args...), url)...)
	// Keep Chromium out of the user's home and caches.
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Helpers that outlived the browser process; ESRCH when none did.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return nil, fmt.Errorf("browsertest: chromium %s: %w\nits stderr ends:\n%s", url, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
