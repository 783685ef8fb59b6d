package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/net/html"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// UpdateEnv, set to 1, makes the test write its screenshots to
// docs/images/debug-*.png, the images of docs/operating.md.
const UpdateEnv = "CONVERGE_UPDATE_SCREENSHOTS"

// The keys and errors of the demo controller "replicasets". scriptKey and
// scriptErr would change the page's title if the browser ran them.
const (
	scriptKey = `default/<script>document.title="pwned"</script>`
	scriptErr = `create pod: <img src=x onerror="document.title='pwned'">`
	quotaErr  = "exceeded quota: pods, limit 2"
	pullErr   = "create pod: pull image registry.example.com/cache:v2: connection refused"
)

// readyKeys are queued behind the two reconciles that block.
var readyKeys = []string{"default/frontend", "default/search", "default/checkout", "default/cart", "default/images", "default/mail"}

// demo is a Manager serving the debug pages on loopback, with leader
// election on a memory lock, a Sharder of 8 buckets on memory locks, and
// two controllers: "pods", sharded, settled and healthy, and "replicasets"
// (2 workers, parked after 3 attempts) holding two parked keys (one named
// like a script, with an error written as HTML), a key failing with its
// next retry 10 minutes away, two keys whose reconciles block until the
// test ends, and six ready keys queued behind them. replicasets records a
// Warning event FailedCreate on each failure and a Normal
// SuccessfulCreate on each success.
type demo struct {
	base   string // http://127.0.0.1:PORT/debug/converge/
	rs     *reconcile.Controller[string]
	shards *shard.Sharder
}

// demoBuckets is the demo Sharder's bucket count.
const demoBuckets = 8

// fastOrSlow is the replicasets' rate limiter: the keys that park retry
// after 10 ms, so that they park quickly; the others after 10 minutes, so that
// they stay retrying while the test looks at them.
type fastOrSlow struct{ fast, slow *backoff.PerKey[string] }

func (l fastOrSlow) pick(key string) *backoff.PerKey[string] {
	if key == "default/batch" || key == scriptKey {
		return l.fast
	}
	return l.slow
}
func (l fastOrSlow) When(key string) time.Duration { return l.pick(key).When(key) }
func (l fastOrSlow) Forget(key string)             { l.pick(key).Forget(key) }
func (l fastOrSlow) NumRequeues(key string) int    { return l.pick(key).NumRequeues(key) }

func startDemo(t *testing.T) *demo {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	release := make(chan struct{})

	rsStore := must.Do(memstore.New[string, int]())
	for _, k := range []string{"default/web", "default/api", "default/batch", scriptKey, "default/cache"} {
		rsStore.Put(k, 3)
	}
	rsInf := must.Do(informer.New("replicasets", rsStore))
	rec := must.Do(events.NewRecorder("replicaset-controller", events.WithSink(must.Do(events.NewMemorySink(0))),
		events.WithContextID(reconcile.ReconcileID)))
	rs, err := reconcile.New("replicasets", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		var err error
		switch {
		case key == "default/batch":
			err = errors.New(quotaErr)
		case key == scriptKey:
			err = errors.New(scriptErr)
		case key == "default/cache":
			err = errors.New(pullErr)
		case strings.HasPrefix(key, "default/export-"):
			select {
			case <-release:
			case <-ctx.Done():
				return reconcile.Result{}, ctx.Err()
			}
		}
		if err != nil {
			rec.Event(ctx, key, events.Warning, "FailedCreate", "Error creating: "+err.Error())
			return reconcile.Result{}, err
		}
		rec.Event(ctx, key, events.Normal, "SuccessfulCreate", "Created pod: "+key+"-x7k2p")
		return reconcile.Result{}, nil
	}), reconcile.For(rsInf), reconcile.WithWorkers(2), reconcile.WithMaxAttempts(3), reconcile.WithEventRecorder(rec),
		reconcile.WithRateLimiter[string](fastOrSlow{
			fast: backoff.NewPerKey[string](backoff.Exponential{Base: 10 * time.Millisecond}),
			slow: backoff.NewPerKey[string](backoff.Exponential{Base: 10 * time.Minute}),
		}), reconcile.WithLogger(quiet))
	require.NoError(t, err)

	podStore := must.Do(memstore.New[string, int]())
	for _, k := range []string{"default/web-x7k2p", "default/web-9fz4q", "default/api-5d8c7"} {
		podStore.Put(k, 1)
	}
	podInf := must.Do(informer.New("pods", podStore))
	shards, err := shard.New(memlock.NewLocks(), shard.Config{Name: "pods", Identity: "replica-a", Buckets: demoBuckets})
	require.NoError(t, err)
	pods, err := reconcile.New("pods", reconcile.Func(func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.For(podInf), reconcile.WithShards(shards), reconcile.WithLogger(quiet))
	require.NoError(t, err)

	m, err := reconcile.NewManager(reconcile.ManagerOptions{
		Addr:   "127.0.0.1:0",
		Debug:  reconcile.DebugOptions{Enabled: true},
		Lock:   memlock.NewLock(),
		Leader: leader.Config{Identity: "replica-a"},
		Shards: shards,
		Logger: quiet,
	})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(rsInf))
	require.NoError(t, m.AddInformer(podInf))
	require.NoError(t, m.AddController(rs))
	require.NoError(t, m.AddController(pods))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(release)
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "Manager.Run")
			case <-time.After(time.Minute):
				t.Error("Manager.Run did not return within a minute of its context's end")
			}
		})
	}
	t.Cleanup(stop)

	h := m.DebugHandler()
	waitFor(t, h, rs.Name(), "the failing keys settle: two parked, one retrying, no worker busy", func(c controllerState) bool {
		return c.ParkedTotal == 2 && c.FailingTotal == 3 && c.Busy == 0 && c.Queue.Len == 0
	})
	waitFor(t, h, pods.Name(), "every pod reconciled, its bucket held", func(c controllerState) bool {
		return c.Reconciles >= 3 && c.Busy == 0 && c.Queue.Len == 0 && pods.Idle() && len(shards.Status().Held) == demoBuckets
	})
	rsStore.Put("default/export-1", 1)
	rsStore.Put("default/export-2", 1)
	waitFor(t, h, rs.Name(), "both workers blocked in the export reconciles", func(c controllerState) bool {
		return c.Busy == 2
	})
	for _, k := range readyKeys {
		rsStore.Put(k, 2)
	}
	waitFor(t, h, rs.Name(), "the six keys queued behind them", func(c controllerState) bool {
		return c.Queue.Len == len(readyKeys)
	})
	return &demo{base: "http://" + m.Addr() + "/debug/converge/", rs: rs, shards: shards}
}

// controllerState is the part of a controller page's JSON that the demo
// waits on.
type controllerState struct {
	Busy, FailingTotal, ParkedTotal int
	Reconciles                      uint64
	Queue                           struct{ Len int }
}

// waitFor polls the JSON of controller's debug page, served by h, until
// cond holds, for up to a minute of real time (a loaded machine under
// -race is slow; the states come in milliseconds when it is not).
func waitFor(t *testing.T, h http.Handler, controller, what string, cond func(controllerState) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		req := httptest.NewRequest(http.MethodGet, "/debug/converge/controllers/"+url.PathEscape(controller)+"?format=json", nil)
		req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, "controller %s's page: %s", controller, w.Body)
		var c controllerState
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &c), "controller %s's page", controller)
		if cond(c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within a minute; controller %s is:\n%s", what, controller, w.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// page is one debug page the test loads, what it checks in the rendered
// DOM, and the image of docs/operating.md it refreshes (shot, if not "").
type page struct {
	name          string
	path          string
	width, height int
	shot          string
	check         func(t *testing.T, doc *html.Node)
}

func TestTheDebugPagesShouldRenderTheControllersStateAsTextInChromium(t *testing.T) {
	b := Find(t)
	d := startDemo(t)
	keyPath := func(key string) string { return "controllers/replicasets/keys/" + url.PathEscape(key) }
	pages := []page{{
		name: "overview", path: "", width: 1280, height: 760, shot: "debug-overview.png",
		check: func(t *testing.T, doc *html.Node) {
			assert.Equal(t, "converge: overview", title(doc))
			row := rowOf(doc, "replicasets")
			require.Len(t, row, 9, "the controllers table's replicasets row")
			assert.Equal(t, []string{"replicasets", "true", "2/2", "6"}, row[:4], "name, running, busy, ready")
			assert.Equal(t, []string{"3", "2"}, row[6:8], "failing, parked")
			assert.Equal(t, "pods", rowOf(doc, "pods")[0], "the second controller's row")
			leaderRow := rowOf(doc, "replica-a")
			require.GreaterOrEqual(t, len(leaderRow), 4, "the leader's row: identity, lock, leading, holder, …")
			assert.Equal(t, []string{"true", "replica-a"}, leaderRow[2:4], "leading, holder")
			assert.Equal(t, []string{"live members", "replica-a"}, rowOf(doc, "live members"), "the sharding block")
			held := rowOf(doc, fmt.Sprintf("held (%d of %d), bucket@epoch", demoBuckets, demoBuckets))
			require.Len(t, held, 2, "the sharding block's held row")
			assert.Equal(t, heldBuckets(d.shards.Status()), held[1], "every bucket with its epoch")
			assert.Equal(t, []string{"releasing (moves in progress)", "none"}, rowOf(doc, "releasing (moves in progress)"))
		},
	}, {
		name: "controller", path: "controllers/replicasets", width: 1280, height: 910, shot: "debug-controller.png",
		check: func(t *testing.T, doc *html.Node) {
			assert.Equal(t, "converge: controller", title(doc))
			body := text(doc)
			assert.Contains(t, body, "workers busy 2/2")
			assert.Contains(t, body, "Failing keys (3)")
			assert.Contains(t, body, "Parked keys (2)")
			for _, k := range append([]string{"default/export-1", "default/export-2"}, readyKeys...) {
				assert.Contains(t, body, k, "in flight or ready")
			}
			export := rowOf(doc, "default/export-1")
			require.Len(t, export, 4, "the in-flight row: key, reconcile ID, age, triggers")
			assert.Regexp(t, `^informer "replicasets" added rev \d+`, export[3], "why it runs")
			assert.Contains(t, body, scriptKey, "the key named like a script is text")
			assert.Contains(t, body, scriptErr, "the error written as HTML is text")
			assert.Contains(t, body, quotaErr)
			assert.Contains(t, body, pullErr)
		},
	}, {
		name: "key named like a script", path: keyPath(scriptKey), width: 1280, height: 700,
		check: func(t *testing.T, doc *html.Node) {
			assert.Equal(t, "converge: key", title(doc))
			assert.Equal(t, "Key "+scriptKey, text(elements(doc, "h1")[0]))
			assert.Equal(t, []string{"attempts", "3"}, rowOf(doc, "attempts"))
			assert.Equal(t, []string{"state", "parked until it changes"}, rowOf(doc, "state"))
			assert.Contains(t, text(doc), scriptErr)
		},
	}, {
		name: "parked key", path: keyPath("default/batch"), width: 1280, height: 730, shot: "debug-key.png",
		check: func(t *testing.T, doc *html.Node) {
			assert.Equal(t, "Key default/batch", text(elements(doc, "h1")[0]))
			assert.Equal(t, []string{"attempts", "3"}, rowOf(doc, "attempts"))
			assert.Equal(t, []string{"state", "parked until it changes"}, rowOf(doc, "state"))
			assert.Equal(t, []string{"unpark", "Retry now if the cause is gone (Controller.Unpark)"}, rowOf(doc, "unpark"), "the unpark button")
			require.Len(t, elements(doc, "form"), 1)
			assert.Equal(t, "post", attr(elements(doc, "form")[0], "method"))
			body := text(doc)
			assert.GreaterOrEqual(t, strings.Count(body, quotaErr), 3, "the last error, the recent reconciles, the event")
			assert.Contains(t, body, `informer "replicasets" added (initial list)`, "the first attempt's trigger")
			assert.Contains(t, body, "backoff", "the retries' trigger")
			event := rowOf(doc, "Warning")
			require.Len(t, event, 7, "the event's row: type, reason, last, count, from, message, reconcile ID")
			assert.Equal(t, "FailedCreate", event[1])
			assert.True(t, strings.HasPrefix(event[3], "3 since"), "three failures counted into one event: %q", event[3])
			assert.Equal(t, []string{"replicaset-controller", "Error creating: " + quotaErr}, event[4:6])
			assert.NotEmpty(t, event[6], "the reconcile that recorded it")
		},
	}}
	update := os.Getenv(UpdateEnv) == "1"
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			got, err := b.Load(t.Context(), d.base+p.path, p.width, p.height)
			require.NoError(t, err)
			doc, err := html.Parse(strings.NewReader(got.DOM))
			require.NoError(t, err)
			// Nothing the page shows may have become markup: the key
			// and error would have added these elements.
			assert.Empty(t, elements(doc, "script"), "script elements in the DOM:\n%s", got.DOM)
			assert.Empty(t, elements(doc, "img"), "img elements in the DOM:\n%s", got.DOM)
			assert.NotContains(t, title(doc), "pwned", "a script ran")
			p.check(t, doc)
			checkScreenshot(t, got.PNG, p.width, p.height)
			if update && p.shot != "" {
				assert.Less(t, len(got.PNG), 200<<10, "the docs' images stay under 200 KB")
				path := filepath.Join("..", "..", "docs", "images", p.shot)
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got.PNG, 0o644))
				t.Logf("wrote %s (%d bytes)", path, len(got.PNG))
			}
		})
	}
}

// heldBuckets writes st's held buckets as the overview does: "ID@EPOCH, …".
func heldBuckets(st shard.Status) string {
	parts := make([]string, len(st.Held))
	for i, b := range st.Held {
		parts[i] = fmt.Sprintf("%d@%d", b.ID, b.Epoch)
	}
	return strings.Join(parts, ", ")
}

// checkScreenshot asserts that data is a PNG of width × height that shows
// something: a white page with a little dark text, not a blank or an error
// page of one colour.
func checkScreenshot(t *testing.T, data []byte, width, height int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err, "the screenshot is a PNG")
	require.Equal(t, image.Rect(0, 0, width, height), img.Bounds(), "the screenshot is the window's size")
	colours := map[[3]uint32]bool{}
	dark := 0
	for y := range height {
		for x := range width {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			if r>>8 < 100 && g>>8 < 100 && b>>8 < 100 {
				dark++
			}
		}
	}
	assert.GreaterOrEqual(t, len(colours), 32, "distinct colours: text, links, table borders and their anti-aliasing")
	share := float64(dark) / float64(width*height)
	assert.Greater(t, share, 0.002, "share of dark (text) pixels")
	assert.Less(t, share, 0.3, "share of dark pixels: a page of text is mostly light")
}

// title returns the document's title as the browser left it.
func title(doc *html.Node) string {
	if ts := elements(doc, "title"); len(ts) > 0 {
		return text(ts[0])
	}
	return ""
}

// rowOf returns the text of each cell of the first table row whose first
// cell's text is first, or nil.
func rowOf(doc *html.Node, first string) []string {
	for _, tr := range elements(doc, "tr") {
		var cells []string
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
				cells = append(cells, strings.TrimSpace(text(c)))
			}
		}
		if len(cells) > 0 && cells[0] == first {
			return cells
		}
	}
	return nil
}

// elements returns every element named tag under n, in document order.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && d.Data == tag {
			out = append(out, d)
		}
	}
	return out
}

// text returns the text under n, as a reader sees it: character
// references decoded, whitespace runs as one space.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// attr returns n's attribute named key, or "".
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
