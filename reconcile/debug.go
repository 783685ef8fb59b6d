package reconcile

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// DebugOptions configures the debug pages under /debug/converge/ on the
// Manager's HTTP server (ManagerOptions.Addr): an overview of controllers,
// informers, the leader and the sharding (ManagerOptions.Shards), a page
// per controller and a page per key, each in HTML (no script) and, with
// ?format=json or Accept: application/json, as JSON of the same structs.
type DebugOptions struct {
	// Enabled registers the pages. It needs Addr (NewManager rejects it
	// without). Default: false, no route is registered.
	Enabled bool
	// AllowRemote serves clients that are not on a loopback address.
	// Default: false: they get 403 Forbidden, whatever address the server
	// binds, since the pages name keys and show error messages. A proxy
	// on the same host counts as loopback: put authentication in it
	// before exposing the pages, as with pprof.
	AllowRemote bool
	// Refresh, if at least a second, makes the HTML pages reload
	// themselves that often (a meta refresh). Default: 0, no reload.
	Refresh time.Duration
	// ShowValues shows each key's value on its page and in its JSON
	// (from the controller's For informer, or WithDebugValue). Default:
	// false, values are never shown: they may hold secrets.
	ShowValues bool
}

// debugRoot is the prefix of every debug page.
const debugRoot = "/debug/converge/"

// inspectable is what the pages need of a controller: *Controller[K] for
// any K.
type inspectable interface {
	Name() string
	Inspect() ControllerInfo
	inspectKeyString(key string) (KeyInfo, bool)
	unparkString(key string) bool
	UnparkAll() int
	enableDebug()
	enableValues()
	clockNow() time.Time
}

// Overview is the debug overview page's data.
type Overview struct {
	Controllers []ControllerInfo
	Informers   []InformerInfo
	// Leader is nil without leader election.
	Leader *leader.Status `json:",omitempty"`
	// Sharding is this replica's part in a sharded deployment
	// (ManagerOptions.Shards): its identity, the live members, the
	// buckets it holds with their epochs, those it is giving up (Releasing:
	// moves in progress) and those it wants but does not hold yet
	// (Campaigning). Nil without Shards.
	Sharding *shard.Status `json:",omitempty"`
	Now      time.Time
}

// InformerInfo is one informer on the overview page.
type InformerInfo struct {
	Name         string
	Synced       bool
	Len          int
	LastRevision informer.Revision
	// Head is the store's current revision, if the Source can tell
	// (informer.HeadRevisioner): asked of every store at once, at most
	// once a second, and shown as last told if the store has not answered
	// within 200ms; HeadError is the last ask's error.
	Head      informer.Revision
	HeadKnown bool
	HeadError string `json:",omitempty"`
	// Lag is Head minus LastRevision, when HeadKnown.
	Lag informer.Revision
	// StalledFor is how long LastRevision has stood still behind Head;
	// Stuck says it passed ManagerOptions.StuckAfter (/readyz fails).
	StalledFor time.Duration
	Stuck      bool
	// Relists counts the lists after the first (Stats.Lists - 1).
	Relists uint64
	Stats   informer.Stats
	// BadKeys lists the first BadKeysShown bad keys by key, and
	// BadKeysTotal counts them all: keys whose latest value could not be
	// taken (see informer.BadKey). They do not fail /readyz.
	BadKeys      []BadKeyLine `json:",omitempty"`
	BadKeysTotal int
}

// ControllerPage is the data of a controller's page.
type ControllerPage struct {
	ControllerInfo
	Now time.Time
}

// KeyPage is the data of a key's page.
type KeyPage struct {
	Controller string
	KeyInfo
	Now time.Time
}

//go:embed debug_templates/*.html
var debugFS embed.FS

var debugTemplates = template.Must(template.New("").Funcs(template.FuncMap{
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
}).ParseFS(debugFS, "debug_templates/*.html"))

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

// DebugHandler returns the debug pages' handler, as the Manager's server
// mounts it under /debug/converge/ when Debug.Enabled: for a program that
// serves the pages on a server of its own. It applies Debug.AllowRemote
// (loopback clients only by default); Enabled is not needed.
//
// Besides the pages (GET), it takes two POSTs, each a button on a page:
// controllers/{name}/unpark/{key} unparks a key (Controller.Unpark) and
// controllers/{name}/unpark-all every parked key of the controller
// (Controller.UnparkAll). They answer 303 back to the page, or, for
// ?format=json, {"Unparked": n}; 409 if the key is not parked. A POST that
// a browser marks as coming from another site (Sec-Fetch-Site, or an
// Origin other than the Host) is refused with 403, so that a page
// elsewhere cannot make the user's browser press the button.
func (m *Manager) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+debugRoot+"{$}", m.serveOverview)
	mux.HandleFunc("GET "+debugRoot+"controllers/{name}", m.serveController)
	mux.HandleFunc("GET "+debugRoot+"controllers/{name}/keys/{key...}", m.serveKey)
	mux.HandleFunc("POST "+debugRoot+"controllers/{name}/unpark/{key...}", m.serveUnpark)
	mux.HandleFunc("POST "+debugRoot+"controllers/{name}/unpark-all", m.serveUnparkAll)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forbid(w, r, "a POST from another site: the debug pages take POSTs from their own pages only")
	}))
	h := cop.Handler(mux)
	if m.opts.Debug.AllowRemote {
		return h
	}
	return loopbackOnly(h)
}

func (m *Manager) serveUnpark(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("name"), r.PathValue("key")
	c := m.controllerOf(w, r)
	if c == nil {
		return
	}
	if !c.unparkString(key) {
		pageError(w, r, fmt.Sprintf("controller %q: key %q is not parked", name, key), http.StatusConflict)
		return
	}
	m.opts.Logger.Info("key unparked from the debug pages", "controller", name, "key", key)
	m.unparkDone(w, r, 1, debugRoot+"controllers/"+url.PathEscape(name)+"/keys/"+url.PathEscape(key))
}

func (m *Manager) serveUnparkAll(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c := m.controllerOf(w, r)
	if c == nil {
		return
	}
	n := c.UnparkAll()
	m.opts.Logger.Info("parked keys unparked from the debug pages", "controller", name, "keys", n)
	m.unparkDone(w, r, n, debugRoot+"controllers/"+url.PathEscape(name))
}

// unparkDone answers an unpark: JSON, or a redirect back to the page.
func (m *Manager) unparkDone(w http.ResponseWriter, r *http.Request, n int, page string) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct{ Unparked int }{n})
		return
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// loopbackOnly answers 403 to clients whose address is not loopback, and
// to requests whose Host is not a loopback name: a page of another site
// whose name was made to resolve to 127.0.0.1 (DNS rebinding) would
// otherwise read the pages from the user's own browser.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			forbid(w, r, "debug pages answer loopback clients only (ManagerOptions.Debug.AllowRemote)")
			return
		}
		if !loopbackHost(r.Host) {
			forbid(w, r, fmt.Sprintf("debug pages answer requests for localhost, 127.0.0.1 or [::1] only, not Host %q "+
				"(ManagerOptions.Debug.AllowRemote)", r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's loopback:
// localhost or a loopback address, with any port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// forbid answers 403, in JSON if the client asked for it.
func forbid(w http.ResponseWriter, r *http.Request, msg string) {
	pageError(w, r, msg, http.StatusForbidden)
}

// pageError answers an error, as {"Error": msg} if the client asked for
// JSON, else as text.
func pageError(w http.ResponseWriter, r *http.Request, msg string, code int) {
	if !wantsJSON(r) {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct{ Error string }{msg})
}

func (m *Manager) serveOverview(w http.ResponseWriter, r *http.Request) {
	m.render(w, r, "overview", m.overview(r.Context()))
}

// overview gathers the overview page: each controller's Inspect, each
// informer's counters and store head, the leader's and the Sharder's
// status.
func (m *Manager) overview(ctx context.Context) Overview {
	o := Overview{Now: m.opts.Clock.Now()}
	for _, c := range m.inspectables() {
		o.Controllers = append(o.Controllers, c.Inspect())
	}
	for _, v := range m.informerViews(ctx) {
		info := InformerInfo{Name: v.Name, Synced: v.Synced, Len: v.Len, LastRevision: v.LastRevision, Stats: v.Stats,
			Head: v.Head, HeadKnown: v.HeadKnown, HeadError: v.HeadError, Lag: v.Lag, Stuck: v.Stuck, StalledFor: v.StalledFor}
		info.Relists = max(info.Stats.Lists, 1) - 1
		info.BadKeys, info.BadKeysTotal = badKeysOf(v.cache, BadKeysShown)
		o.Informers = append(o.Informers, info)
	}
	if m.elector != nil {
		st := m.elector.Status()
		o.Leader = &st
	}
	if m.opts.Shards != nil {
		st := m.opts.Shards.Status()
		o.Sharding = &st
	}
	return o
}

func (m *Manager) serveController(w http.ResponseWriter, r *http.Request) {
	c := m.controllerOf(w, r)
	if c == nil {
		return
	}
	m.render(w, r, "controller", ControllerPage{ControllerInfo: c.Inspect(), Now: c.clockNow()})
}

func (m *Manager) serveKey(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("name"), r.PathValue("key")
	c := m.controllerOf(w, r)
	if c == nil {
		return
	}
	info, ok := c.inspectKeyString(key)
	if !ok {
		pageError(w, r, fmt.Sprintf("controller %q knows nothing of key %q: not in its informer, not queued, not failing, "+
			"not among its recent reconciles", name, key), http.StatusNotFound)
		return
	}
	m.render(w, r, "key", KeyPage{Controller: name, KeyInfo: info, Now: c.clockNow()})
}

// wantsJSON reports whether the client asked for JSON.
func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// render writes data as JSON or through the named template, buffered so
// that a template error is a 500, not half a page.
func (m *Manager) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(data); err != nil {
			m.opts.Logger.Error("debug page: encoding JSON", "page", name, "error", err)
		}
		return
	}
	var b strings.Builder
	page := struct {
		Title   string
		Refresh int
		Data    any
	}{Title: name, Refresh: int(m.opts.Debug.Refresh / time.Second), Data: data}
	if err := debugTemplates.ExecuteTemplate(&b, name+".html", page); err != nil {
		m.opts.Logger.Error("debug page: rendering", "page", name, "error", err)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// inspectables returns the controllers the pages show, in the order added.
func (m *Manager) inspectables() []inspectable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]inspectable(nil), m.controllers...)
}

// controllerOf returns the controller the request's path names, or
// answers 404 and returns nil.
func (m *Manager) controllerOf(w http.ResponseWriter, r *http.Request) inspectable {
	name := r.PathValue("name")
	if c := m.inspectable(name); c != nil {
		return c
	}
	pageError(w, r, fmt.Sprintf("no controller %q", name), http.StatusNotFound)
	return nil
}

func (m *Manager) inspectable(name string) inspectable {
	for _, c := range m.inspectables() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// errDebugWithoutAddr is NewManager's error for Debug.Enabled without Addr.
var errDebugWithoutAddr = errors.New("reconcile.NewManager: Debug.Enabled needs Addr: the pages are served on the Manager's HTTP server")
