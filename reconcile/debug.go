package reconcile

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// DebugOptions configures the debug pages under /debug/converge/ on the
// Manager's HTTP server (ManagerOptions.Addr): an overview of controllers,
// informers, the leader and the sharding (ManagerOptions.Shards), a page
// per controller and a page per key, each in HTML (no script) and, with
// ?format=json or Accept: application/json, as JSON of the same data.
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
const debugRoot = debugpage.Root

// inspectable is what the pages need of a controller: *Controller[K] for
// any K.
type inspectable interface {
	Name() string
	inspect() debugpage.ControllerInfo
	inspectKeyString(key string) (debugpage.KeyInfo, bool)
	unparkString(key string) bool
	UnparkAll() int
	enableDebug()
	enableValues()
	clockNow() time.Time
}

// DebugHandler returns the debug pages' handler, as the Manager's server
// mounts it under /debug/converge/ when Debug.Enabled: for a program that
// serves the pages on a server of its own. It applies Debug.AllowRemote
// (loopback clients only by default) and Debug.Refresh; Enabled is not
// needed.
//
// Besides the pages (GET), it takes two POSTs, each a button on a page:
// controllers/{name}/unpark/{key} unparks a key (Controller.Unpark) and
// controllers/{name}/unpark-all every parked key of the controller
// (Controller.UnparkAll). They answer 303 back to the page, or, for
// ?format=json, {"Unparked": n}; 409 if the key is not parked. A POST that
// a browser marks as coming from another site (Sec-Fetch-Site, or an
// Origin other than the Host) is refused with 403, so that a page
// elsewhere cannot make the user's browser press the button.
//
// The JSON of a page is for people and their tools, not an API: its
// fields may change between releases.
func (m *Manager) DebugHandler() http.Handler {
	return debugpage.Handler(debugSite{m}, debugpage.Options{
		AllowRemote: m.opts.Debug.AllowRemote,
		Refresh:     m.opts.Debug.Refresh,
		Logger:      m.opts.Logger,
	})
}

// debugSite shows a Manager on the debug pages.
type debugSite struct{ m *Manager }

func (s debugSite) Controllers() []debugpage.Controller {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	cs := make([]debugpage.Controller, len(s.m.controllers))
	for i, c := range s.m.controllers {
		cs[i] = debugController{c}
	}
	return cs
}

// Informers reads each informer's counters and store head, and its bad
// keys.
func (s debugSite) Informers(ctx context.Context) []debugpage.InformerInfo {
	var out []debugpage.InformerInfo
	for _, v := range s.m.informerViews(ctx) {
		info := debugpage.InformerInfo{Name: v.Name, Synced: v.Synced, Len: v.Len, LastRevision: v.LastRevision, Stats: v.Stats,
			Head: v.Head, HeadKnown: v.HeadKnown, HeadError: v.HeadError, Lag: v.Lag, Stuck: v.Stuck, StalledFor: v.StalledFor}
		info.Relists = max(info.Stats.Lists, 1) - 1
		info.BadKeys, info.BadKeysTotal = badKeysOf(v.cache, debugpage.BadKeysShown)
		out = append(out, info)
	}
	return out
}

func (s debugSite) Leader() *leader.Status {
	if s.m.elector == nil {
		return nil
	}
	st := s.m.elector.Status()
	return &st
}

func (s debugSite) Sharding() *shard.Status {
	if s.m.opts.Shards == nil {
		return nil
	}
	st := s.m.opts.Shards.Status()
	return &st
}

func (s debugSite) Now() time.Time { return s.m.opts.Clock.Now() }

// debugController shows a controller on the debug pages.
type debugController struct{ c inspectable }

func (d debugController) Name() string                           { return d.c.Name() }
func (d debugController) Info() debugpage.ControllerInfo         { return d.c.inspect() }
func (d debugController) Key(k string) (debugpage.KeyInfo, bool) { return d.c.inspectKeyString(k) }
func (d debugController) Unpark(k string) bool                   { return d.c.unparkString(k) }
func (d debugController) UnparkAll() int                         { return d.c.UnparkAll() }
func (d debugController) Now() time.Time                         { return d.c.clockNow() }

// errDebugWithoutAddr is NewManager's error for Debug.Enabled without Addr.
var errDebugWithoutAddr = errors.New("reconcile.NewManager: Debug.Enabled needs Addr: the pages are served on the Manager's HTTP server")
