package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// DefaultShutdownTimeout bounds how long Manager.Run waits, once its context
// is done, for everything it started to return.
const DefaultShutdownTimeout = 60 * time.Second

// ManagerOptions configures a Manager. Every field is optional.
type ManagerOptions struct {
	// Lock enables leader election over any backend (leader/memlock,
	// leader/etcdlock, leader/pglock): informers run on every replica, so
	// that caches are warm, but controllers and leader-only functions run
	// only while this replica holds the lease, with the term's fencing
	// token in their contexts. When Run's context is done, the Manager
	// keeps renewing the lease until the controllers have finished their
	// shutdown grace and every leader-only function has returned, and only
	// then gives it up, so that no other replica starts leading while this
	// one still acts; if the lease is lost meanwhile, the reconciles in
	// progress are cancelled at once. Default: nil, no election;
	// controllers always run.
	Lock leader.Lock
	// Leader configures the elector when Lock is set. Identity is required;
	// the timings default to leader's defaults; ReleaseOnCancel releases
	// the lease once everything leader-only has stopped. Its
	// OnStartedLeading and OnStoppedLeading must be nil: the Manager uses
	// them. OnNewLeader is called as usual. Setting any field without Lock
	// is an error: it would run every replica as the leader.
	Leader leader.Config
	// Standby makes the Manager, on losing leadership, stop its controllers
	// and campaign again, instead of returning an error wrapping
	// ErrLeadershipLost from Run. The default, exiting, is the safe one:
	// a restarted process cannot carry state from its lost term. Default:
	// false.
	Standby bool

	// Shards is the Sharder of the Manager's sharded controllers
	// (WithShards): Run runs it on every replica, election or not, and
	// /healthz fails while its Check does. Sharded controllers also run
	// on every replica. It is the one way to run a Sharder under a
	// Manager: AddController refuses a controller sharded over another
	// Sharder, and running it also elsewhere (AddFunc of its Run) fails
	// Run with shard.ErrRunTwice. Default: nil, no sharded controllers.
	Shards *shard.Sharder

	// Addr is the host:port of an HTTP server that serves /healthz,
	// /readyz and /metrics, e.g. "127.0.0.1:8081"; a port of 0 picks a
	// free one (see Manager.Addr). NewManager rejects an address that is
	// not host:port. Default: "" (or "off", for a command-line flag that
	// needs a word), no server: a Manager opens no port unless asked, so
	// that two in one process or on one host do not collide.
	Addr string
	// Gatherer is what /metrics serves, typically the *prometheus.Registry
	// the controllers' WithMetrics registered on. Default: nil, /metrics
	// answers 404.
	Gatherer prometheus.Gatherer
	// Registerer receives the informer metrics (converge_informer_*,
	// labelled informer), registered for each informer as AddInformer or
	// AddController adds it:
	// informer names must be unique per registry, as controller names
	// are. Default: Gatherer, if it is also a Registerer (a
	// *prometheus.Registry), else none: no metric goes to a registry the
	// caller did not give.
	Registerer prometheus.Registerer
	// StuckAfter is how long an informer's revision may stand still
	// behind its store's head (informer.HeadRevisioner) before /readyz
	// fails for it, and converge_informer_stuck says 1: a dead watch, or
	// one that cannot get past a change. An informer whose revision moves,
	// however far behind, is not stuck, nor is one whose Source tells no
	// head. A Source whose head also counts other collections' writes
	// (etcd, PostgreSQL) must bookmark more often than StuckAfter: etcd
	// sends progress notifications every 10 minutes unless the server is
	// told otherwise (--experimental-watch-progress-notify-interval).
	// The Manager looks when asked (/readyz, /metrics, the pages), so the
	// first look after the revision stopped starts the clock; a probe
	// every few seconds makes that moment. Default: DefaultStuckAfter;
	// negative: never stuck.
	StuckAfter time.Duration
	// Clock is the Manager's clock, for StuckAfter and the metrics' ages;
	// give the informers the same one. Default: the real clock.
	Clock clock.PassiveClock
	// ShutdownTimeout bounds how long Run waits, once its context is done,
	// for informers, controllers and functions to return; then Run returns
	// an error naming those still running. Controllers' own shutdown grace
	// (WithShutdownGrace) should be shorter. Default: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives the Manager's own lines. Default: slog.Default().
	Logger *slog.Logger
	// Debug serves debug pages on the HTTP server: see DebugOptions.
	// Default: off.
	Debug DebugOptions
}

// Runner is what a Manager runs as a controller: *Controller[K] for any K.
// Caches are the informers it watches, which AddController adds.
type Runner interface {
	Name() string
	Caches() []Cache
	Run(ctx context.Context) error
}

// Manager runs informers, controllers and other functions together, with
// optional leader election and an HTTP server for health, readiness and
// metrics. Create one with NewManager, add to it, then call Run once.
type Manager struct {
	opts    ManagerOptions
	elector *leader.Elector // nil without leader election

	mu sync.Mutex
	// Everything below is guarded by mu.
	names  map[string]bool // "kind/name": names are unique per kind
	caches []Cache
	// controllers are the controllers the debug pages show.
	controllers []inspectable
	leading     []task // controllers and leader-only functions
	always      []task // functions that run on every replica
	addr        string
	started     bool
	// health is what the Manager knows of each informer's progress
	// (informer_health.go), one per cache, in the same order.
	health []*informerHealth

	// The terms' leader-only tasks: termsClosed is set once Run is
	// stopping (no new term starts them), terms counts the terms running
	// them, and term is the latest term's, for the shutdown timeout's
	// error.
	termsClosed bool
	terms       sync.WaitGroup
	term        *taskGroup

	// lead runs a term's leader-only tasks; set by Run before the elector
	// starts, called by the elector.
	lead func(lctx context.Context)
}

// task is a named function the Manager runs.
type task struct {
	kind, name string
	run        func(ctx context.Context) error
}

// NewManager returns a Manager, or an error for invalid options: leader
// timings and identity, Leader set without Lock, an Addr that is not
// host:port, a negative ShutdownTimeout, Debug.Enabled without Addr, a
// Debug.Refresh under a second.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.Addr == "off" {
		opts.Addr = ""
	}
	if opts.Addr != "" {
		if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
			return nil, fmt.Errorf("reconcile.NewManager: Addr %q: want host:port (\"\" for no server): %w", opts.Addr, err)
		}
	}
	if opts.Lock == nil && leaderConfigSet(opts.Leader) {
		return nil, errors.New("reconcile.NewManager: Leader is set but Lock is nil: without a Lock there is no election " +
			"and every replica would lead; set Lock (leader/memlock, leader/etcdlock, leader/pglock) or leave Leader empty")
	}
	if opts.Debug.Enabled && opts.Addr == "" {
		return nil, errDebugWithoutAddr
	}
	if opts.Debug.Refresh != 0 && opts.Debug.Refresh < time.Second {
		return nil, fmt.Errorf("reconcile.NewManager: Debug.Refresh %v: want 0 (no reload) or at least a second", opts.Debug.Refresh)
	}
	if opts.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("reconcile.NewManager: negative ShutdownTimeout %v", opts.ShutdownTimeout)
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StuckAfter == 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Manager{opts: opts, names: make(map[string]bool)}
	if opts.Lock != nil {
		if opts.Leader.OnStartedLeading != nil || opts.Leader.OnStoppedLeading != nil {
			return nil, errors.New("reconcile.NewManager: Leader.OnStartedLeading and OnStoppedLeading must be nil: the Manager uses them")
		}
		cfg := opts.Leader
		cfg.OnStartedLeading = func(lctx context.Context) { m.lead(lctx) }
		e, err := leader.New(opts.Lock, cfg)
		if err != nil {
			return nil, fmt.Errorf("reconcile.NewManager: %w", err)
		}
		m.elector = e
	}
	return m, nil
}

// leaderConfigSet reports whether any field of c is set.
func leaderConfigSet(c leader.Config) bool {
	return c.Identity != "" || c.LeaseDuration != 0 || c.RenewDeadline != 0 || c.RetryPeriod != 0 ||
		c.JitterFactor != 0 || c.ReleaseOnCancel || c.OnStartedLeading != nil || c.OnStoppedLeading != nil ||
		c.OnNewLeader != nil || c.Clock != nil
}

// AddInformer adds an informer (*informer.Informer[K, V]) for Run to run on
// every replica, and registers its metrics (ManagerOptions.Registerer).
// AddController adds the informers its controller watches; AddInformer is
// for the others (an informer a function reads, say). Adding an informer
// the Manager runs already is a no-op; another informer of the same name is
// an error: informer names are unique within the Manager, and within the
// registry.
func (m *Manager) AddInformer(c Cache) error {
	if c == nil {
		return errors.New("reconcile: AddInformer(nil)")
	}
	return m.add(func() error {
		return m.addCaches([]Cache{c})
	})
}

// addCaches adds those of cs the Manager does not run yet, all or none.
// The caller holds mu.
func (m *Manager) addCaches(cs []Cache) error {
	var fresh []Cache
	for _, c := range cs {
		if hasCache(m.caches, c) || hasCache(fresh, c) {
			continue
		}
		if err := m.free("informer", c.Name()); err != nil {
			return err
		}
		if slices.ContainsFunc(fresh, func(f Cache) bool { return f.Name() == c.Name() }) {
			return fmt.Errorf("informer %q: the name is taken", c.Name())
		}
		fresh = append(fresh, c)
	}
	hs := make([]*informerHealth, len(fresh))
	var unregister []func()
	for i, c := range fresh {
		hs[i] = &informerHealth{c: c}
		u, err := m.registerInformerMetrics(hs[i])
		if err != nil {
			for _, u := range unregister {
				u()
			}
			return err
		}
		unregister = append(unregister, u)
	}
	for i, c := range fresh {
		_ = m.claim("informer", c.Name()) // free, checked above
		m.caches = append(m.caches, c)
		m.health = append(m.health, hs[i])
	}
	return nil
}

// AddController adds a controller for Run to run while this replica leads
// (always, without leader election; always too if it is sharded, see
// WithShards), and the informers it watches (For, Owns, Watch) that the
// Manager does not run yet, as AddInformer would: two controllers that
// watch one informer share it. Its name must be unique among the
// Manager's controllers. A sharded controller's Sharder must be the
// Manager's ManagerOptions.Shards, or AddController fails: no one else
// would run it. An AddController that fails adds nothing.
func (m *Manager) AddController(c Runner) error {
	if c == nil || isNilFunc(c) {
		return errors.New("reconcile: AddController(nil)")
	}
	return m.add(func() error {
		if sc, ok := c.(interface{ sharder() *shard.Sharder }); ok {
			if s := sc.sharder(); s != nil && s != m.opts.Shards {
				return fmt.Errorf("controller %q is sharded (WithShards) over a Sharder this Manager does not run, "+
					"so it would hold no bucket and reconcile nothing: give that Sharder as ManagerOptions.Shards", c.Name())
			}
		}
		if err := m.free("controller", c.Name()); err != nil {
			return err
		}
		if err := m.addCaches(c.Caches()); err != nil {
			return fmt.Errorf("controller %q: %w", c.Name(), err)
		}
		_ = m.claim("controller", c.Name()) // free, checked above
		t := task{kind: "controller", name: c.Name(), run: c.Run}
		if sc, ok := c.(interface{ sharded() bool }); ok && sc.sharded() {
			m.always = append(m.always, t) // each replica runs its buckets
		} else {
			m.leading = append(m.leading, t)
		}
		if ic, ok := c.(inspectable); ok {
			m.controllers = append(m.controllers, ic)
			if m.opts.Debug.Enabled {
				ic.enableDebug()
			}
			if m.opts.Debug.ShowValues {
				ic.enableValues()
			}
		}
		return nil
	})
}

// AddFunc adds a function for Run to run on every replica, as the
// informers and the HTTP server run, whether or not this replica leads:
// a server, a node agent, a process that feeds a store. A function that
// must run on one replica at a time goes to AddLeaderFunc instead.
// (controller-runtime's Manager.Add runs a Runnable only on the leader
// unless it says otherwise; here each method's name says where it runs.)
// fn must return when its context is done; an error from it ends Run.
// Names are unique among the Manager's functions.
func (m *Manager) AddFunc(name string, fn func(ctx context.Context) error) error {
	return m.addFunc("AddFunc", name, fn, &m.always)
}

// AddLeaderFunc adds a function for Run to run only while this replica
// leads, as controllers run: without leader election at once, with it for
// each term this replica wins, with the term (leader.TermFromContext) in
// its context, which is cancelled when the lease is lost or Run stops.
// Under a Lock, the Manager gives the lease up only after the function has
// returned. fn must return when its context is done; an error from it
// ends Run. Names are unique among the Manager's functions.
func (m *Manager) AddLeaderFunc(name string, fn func(ctx context.Context) error) error {
	return m.addFunc("AddLeaderFunc", name, fn, &m.leading)
}

func (m *Manager) addFunc(method, name string, fn func(ctx context.Context) error, to *[]task) error {
	if fn == nil {
		return fmt.Errorf("reconcile: %s(%q): nil function", method, name)
	}
	return m.add(func() error {
		if err := m.claim("function", name); err != nil {
			return err
		}
		*to = append(*to, task{kind: "function", name: name, run: fn})
		return nil
	})
}

func (m *Manager) add(f func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errors.New("reconcile: cannot add to a Manager that has started")
	}
	if err := f(); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return nil
}

func (m *Manager) claim(kind, name string) error {
	if err := m.free(kind, name); err != nil {
		return err
	}
	m.names[kind+"/"+name] = true
	return nil
}

// free returns an error if name cannot be claimed for kind.
func (m *Manager) free(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s with an empty name", kind)
	}
	if m.names[kind+"/"+name] {
		return fmt.Errorf("%s %q: the name is taken", kind, name)
	}
	return nil
}

// hasCache reports whether cs holds c itself.
func hasCache(cs []Cache, c Cache) bool {
	if !reflect.TypeOf(c).Comparable() {
		return false // == would panic; an informer is a pointer anyway
	}
	return slices.Contains(cs, c)
}

// Addr returns the HTTP server's address once Run has started it, else "".
func (m *Manager) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// IsLeader reports whether this replica leads now: it holds the lease,
// also while its controllers finish their shutdown grace. Always true
// without leader election.
func (m *Manager) IsLeader() bool { return m.elector == nil || m.elector.IsLeader() }

// Elector returns the Manager's elector, nil without leader election.
func (m *Manager) Elector() *leader.Elector { return m.elector }
