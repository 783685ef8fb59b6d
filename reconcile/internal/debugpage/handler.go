package debugpage

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// Root is the prefix of every page.
const Root = "/debug/converge/"

// Site is what the pages read of a Manager.
type Site interface {
	// Controllers returns the controllers shown, in the order added.
	Controllers() []Controller
	// Informers returns the informers shown, with their store heads;
	// ctx is the request's.
	Informers(ctx context.Context) []InformerInfo
	// Leader is the leader election's status; nil without election.
	Leader() *leader.Status
	// Sharding is this replica's sharding status; nil without sharding.
	Sharding() *shard.Status
	// Now is the Manager's clock.
	Now() time.Time
}

// Controller is what the pages read of, and do to, one controller.
type Controller interface {
	Name() string
	// Info is the controller's snapshot, bounded whatever the number of
	// keys.
	Info() ControllerInfo
	// Key is what the controller knows of the key whose fmt.Sprint is
	// key; false if nothing.
	Key(key string) (KeyInfo, bool)
	// Unpark unparks the key whose fmt.Sprint is key; false if it is not
	// parked.
	Unpark(key string) bool
	// UnparkAll unparks every parked key and counts them.
	UnparkAll() int
	// Now is the controller's clock, which its times are on.
	Now() time.Time
}

// Options configure Handler.
type Options struct {
	// AllowRemote serves clients that are not on a loopback address, and
	// Host names that are not loopback. Default: false, 403 for them.
	AllowRemote bool
	// Refresh, if at least a second, makes the HTML pages reload
	// themselves that often. Default: 0, no reload.
	Refresh time.Duration
	// Logger logs unparks and rendering errors. Default: slog.Default().
	Logger *slog.Logger
}

// Handler serves the pages of site under Root: GET of the overview
// (Root), a controller (controllers/{name}) and a key
// (controllers/{name}/keys/{key}), and the POSTs of the unpark buttons
// (controllers/{name}/unpark/{key} and controllers/{name}/unpark-all),
// which answer 303 back to the page or {"Unparked": n} in JSON, and 409
// for a key that is not parked. A POST a browser marks as coming from
// another site is refused with 403.
func Handler(site Site, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &server{site: site, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Root+"{$}", s.serveOverview)
	mux.HandleFunc("GET "+Root+"controllers/{name}", s.serveController)
	mux.HandleFunc("GET "+Root+"controllers/{name}/keys/{key...}", s.serveKey)
	mux.HandleFunc("POST "+Root+"controllers/{name}/unpark/{key...}", s.serveUnpark)
	mux.HandleFunc("POST "+Root+"controllers/{name}/unpark-all", s.serveUnparkAll)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forbid(w, r, "a POST from another site: the debug pages take POSTs from their own pages only")
	}))
	h := cop.Handler(mux)
	if opts.AllowRemote {
		return h
	}
	return loopbackOnly(h)
}

// server serves one Site.
type server struct {
	site Site
	opts Options
}

//go:embed templates/*.html
var templatesFS embed.FS

// templates are parsed at the first page rendered, not when a program
// that imports reconcile starts: most never serve a page.
var templates = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"path": url.PathEscape,
		"ago": func(now, t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			d := now.Sub(t).Round(time.Millisecond)
			if d < 0 {
				return "in " + (-d).String()
			}
			return d.String() + " ago"
		},
		"has":       func(ids []int, id int) bool { return slices.Contains(ids, id) },
		"ids":       listed[int],
		"names":     listed[string],
		"dur":       func(d time.Duration) string { return d.Round(time.Microsecond).String() },
		"truncated": func(shown string, n int) bool { return len(shown) < n },
		"json": func(v any) string {
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return fmt.Sprintf("%+v", v)
			}
			return string(b)
		},
	}).ParseFS(templatesFS, "templates/*.html"))
})

// listed writes items as "a, b, c", or "none" if there is none.
func listed[T any](items []T) string {
	if len(items) == 0 {
		return "none"
	}
	parts := make([]string, len(items))
	for i, x := range items {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

func (s *server) serveOverview(w http.ResponseWriter, r *http.Request) {
	o := Overview{Now: s.site.Now()}
	for _, c := range s.site.Controllers() {
		o.Controllers = append(o.Controllers, c.Info())
	}
	o.Informers = s.site.Informers(r.Context())
	o.Leader, o.Sharding = s.site.Leader(), s.site.Sharding()
	s.render(w, r, "overview", o)
}

func (s *server) serveController(w http.ResponseWriter, r *http.Request) {
	c := s.controllerOf(w, r)
	if c == nil {
		return
	}
	s.render(w, r, "controller", ControllerPage{ControllerInfo: c.Info(), Now: c.Now()})
}

func (s *server) serveKey(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("name"), r.PathValue("key")
	c := s.controllerOf(w, r)
	if c == nil {
		return
	}
	info, ok := c.Key(key)
	if !ok {
		pageError(w, r, fmt.Sprintf("controller %q knows nothing of key %q: not in its informer, not queued, not failing, "+
			"not among its recent reconciles", name, key), http.StatusNotFound)
		return
	}
	s.render(w, r, "key", KeyPage{Controller: name, KeyInfo: info, Now: c.Now()})
}

func (s *server) serveUnpark(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("name"), r.PathValue("key")
	c := s.controllerOf(w, r)
	if c == nil {
		return
	}
	if !c.Unpark(key) {
		pageError(w, r, fmt.Sprintf("controller %q: key %q is not parked", name, key), http.StatusConflict)
		return
	}
	s.opts.Logger.Info("key unparked from the debug pages", "controller", name, "key", key)
	unparkDone(w, r, 1, Root+"controllers/"+url.PathEscape(name)+"/keys/"+url.PathEscape(key))
}

func (s *server) serveUnparkAll(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c := s.controllerOf(w, r)
	if c == nil {
		return
	}
	n := c.UnparkAll()
	s.opts.Logger.Info("parked keys unparked from the debug pages", "controller", name, "keys", n)
	unparkDone(w, r, n, Root+"controllers/"+url.PathEscape(name))
}

// unparkDone answers an unpark: JSON, or a redirect back to the page.
func unparkDone(w http.ResponseWriter, r *http.Request, n int, page string) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct{ Unparked int }{n})
		return
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// controllerOf returns the controller the request's path names, or
// answers 404 and returns nil.
func (s *server) controllerOf(w http.ResponseWriter, r *http.Request) Controller {
	name := r.PathValue("name")
	for _, c := range s.site.Controllers() {
		if c.Name() == name {
			return c
		}
	}
	pageError(w, r, fmt.Sprintf("no controller %q", name), http.StatusNotFound)
	return nil
}

// wantsJSON reports whether the client asked for JSON.
func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// render writes data as JSON or through the named template, buffered so
// that a template error is a 500, not half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(data); err != nil {
			s.opts.Logger.Error("debug page: encoding JSON", "page", name, "error", err)
		}
		return
	}
	var b strings.Builder
	page := struct {
		Title   string
		Refresh int
		Data    any
	}{Title: name, Refresh: int(s.opts.Refresh / time.Second), Data: data}
	if err := templates().ExecuteTemplate(&b, name+".html", page); err != nil {
		s.opts.Logger.Error("debug page: rendering", "page", name, "error", err)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
