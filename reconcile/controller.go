package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/internal/workqueue"
)

// ErrLeadershipLost is the cause (context.Cause) of a controller's context
// when the Manager cancels it because this replica lost leadership. Run then
// cancels the reconciles in progress at once, without a shutdown grace.
var ErrLeadershipLost = errors.New("leadership lost")

// Controller reconciles the keys its watches deliver: it queues them
// (deduplicated, prioritised, with per-key backoff), and runs the Reconciler
// on up to the configured number of workers, never two on one key. Create
// one with New; run it with Run, or add it to a Manager. See the package
// documentation for the contracts.
type Controller[K comparable] struct {
	name    string
	rec     Reconciler[K]
	s       settings
	limiter backoff.Limiter[K]
	watches []watch[K]
	metrics *metrics // nil without WithMetrics
	// queueMetrics outlive the per-Run queues; nil without WithMetrics.
	queueMetrics *workqueue.Metrics
	groupOf      func(K) string // nil: no fairness groups
	keys         keyStates[K]
	gate         gate[K]       // read your own writes (Wrote)
	ids          atomic.Uint64 // reconcile IDs
	// shards is the controller's sharding (WithShards); nil: not sharded.
	shards *sharding[K]
	// debug says that a Manager serves debug pages for the controller
	// (ManagerOptions.Debug): each Run's queue notes ready times and its
	// reconciles their start and duration, for the pages' waits and ages.
	// Read when a Run starts.
	debug atomic.Bool
	// showValues makes the key pages show values (Debug.ShowValues), from
	// valueOf (nil: none to show).
	showValues atomic.Bool
	valueOf    func(K) (any, bool)

	mu sync.Mutex
	// cur is the Run in progress, nil between Runs; guarded by mu.
	cur *run[K]
}

// New returns a controller named name (unique per Manager and per metrics
// registry: it labels logs and metrics) that calls rec for the keys its
// watches deliver. opts must include at least one watch (For, Watch,
// FromFunc, FromChannel). New reports bad input as an error: an empty name,
// a nil reconciler, an invalid option, a watch or rate limiter for another key
// type, metrics already registered under this name. A New that fails leaves
// nothing behind: no metrics registered, no index added to a child informer
// (Owns), no handler added to a Sharder (WithShards).
func New[K comparable](name string, rec Reconciler[K], opts ...Option) (*Controller[K], error) {
	if name == "" {
		return nil, errors.New("reconcile.New: empty controller name")
	}
	if rec == nil || isNilFunc(rec) {
		return nil, fmt.Errorf("reconcile.New(%q): nil reconciler", name)
	}
	s := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("reconcile.New(%q): nil option", name)
		}
		if err := o(&s); err != nil {
			return nil, fmt.Errorf("reconcile.New(%q): %w", name, err)
		}
	}
	c := &Controller[K]{name: name, rec: rec, s: s}
	if c.s.logger == nil {
		c.s.logger = slog.Default()
	}
	c.s.logger = c.s.logger.With("controller", name)
	if len(s.watches) == 0 {
		return nil, fmt.Errorf("reconcile.New(%q): nothing to watch: give For, Watch, FromFunc or FromChannel", name)
	}
	for _, w := range s.watches {
		ww, err := checkWatch[K](w)
		if err != nil {
			return nil, fmt.Errorf("reconcile.New(%q): %w", name, err)
		}
		if s, ok := ww.(interface{ setIndex(int) }); ok {
			s.setIndex(len(c.watches))
		}
		c.watches = append(c.watches, ww)
	}
	switch l := s.limiter.(type) {
	case nil:
		c.limiter = backoff.DefaultController[K](s.clock)
	case backoff.Limiter[K]:
		c.limiter = l
	default:
		return nil, fmt.Errorf("reconcile.New(%q): WithRateLimiter: %T does not limit keys of type %v", name, l, reflect.TypeFor[K]())
	}
	switch g := s.groupOf.(type) {
	case nil:
	case func(K) string:
		c.groupOf = g
	default:
		return nil, fmt.Errorf("reconcile.New(%q): WithGroups: %T does not group keys of type %v", name, g, reflect.TypeFor[K]())
	}
	valueOf, err := debugValueOf(&c.s, c.watches)
	if err != nil {
		return nil, fmt.Errorf("reconcile.New(%q): %w", name, err)
	}
	c.valueOf = valueOf
	for _, o := range s.owned {
		if err := o.check(name); err != nil {
			return nil, fmt.Errorf("reconcile.New(%q): %w", name, err)
		}
	}
	if err := c.apply(); err != nil {
		return nil, fmt.Errorf("reconcile.New(%q): %w", name, err)
	}
	c.keys.init()
	c.gate.init(&c.s, c.metrics)
	return c, nil
}

// apply makes New's side effects, once everything is checked: it
// registers the metrics, adds Owns's indexes, and registers with the
// Sharder, in that order, and undoes those it made if one fails, so that a
// New that fails leaves nothing behind. The Sharder comes last because a
// Sharder cannot forget a handler.
func (c *Controller[K]) apply() (err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for _, u := range slices.Backward(undo) {
				u()
			}
		}
	}()
	if reg := c.s.registerer; reg != nil {
		m, err := newMetrics(c.name, c.s.workers, reg)
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		undo = append(undo, func() { reg.Unregister(m) })
		qm, err := workqueue.NewMetrics(reg, c.name, c.name)
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		undo = append(undo, func() { qm.Unregister() })
		c.metrics, c.queueMetrics = m, qm
	}
	for _, o := range c.s.owned {
		u, err := o.add(c.name)
		if err != nil {
			return err
		}
		undo = append(undo, u)
	}
	return c.initShards()
}

// isNilFunc catches Func(nil) (or any nil func or pointer) passed as a Reconciler.
func isNilFunc(rec any) bool {
	v := reflect.ValueOf(rec)
	switch v.Kind() {
	case reflect.Func, reflect.Pointer, reflect.Map, reflect.Chan, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// Name returns the controller's name.
func (c *Controller[K]) Name() string { return c.name }

// Caches returns the informers the controller watches (For, Owns, Watch),
// which Manager.AddController adds to the Manager.
func (c *Controller[K]) Caches() []Cache {
	var out []Cache
	for _, w := range c.watches {
		if cache := w.cache(); cache != nil {
			out = append(out, cache)
		}
	}
	return out
}

// Status returns what the controller knows about a key that is failing or
// parked: its consecutive failed attempts, the last error, when it is retried
// next, whether it is parked. The second result is false for a key with no
// failures since its last success (or that the controller has never seen).
func (c *Controller[K]) Status(key K) (KeyStatus, bool) { return c.keys.status(key) }

// Parked returns the keys parked after WithMaxAttempts failed attempts, in
// no particular order.
func (c *Controller[K]) Parked() []K { return c.keys.parked() }

// Idle reports whether the controller is running and has nothing to do right
// now: every watched informer has delivered every change it applied to the
// controller, no key is ready in the queue, and no reconcile is in progress.
// Keys waiting for a requeue delay or a backoff do not count, nor do keys
// parked until an informer has their reconciles' writes (see Wrote); a
// parked key whose informer has caught up counts as work until it is
// queued again. Sources added
// with FromFunc or FromChannel are not tracked. The reconciletest package
// uses it to wait for a controller to settle without sleeping.
func (c *Controller[K]) Idle() bool {
	r := c.current()
	return r != nil && r.idle()
}

// Run starts the watches, waits for every watched informer to sync (at most
// the sync timeout, then it returns an error naming those that did not),
// and reconciles keys on the configured number of workers until ctx is done.
// Every key of every watched informer is reconciled at least once per Run:
// the informers' current contents are queued first, at low priority, behind
// fresh changes.
//
// Run does not run the informers themselves: a Manager does, or the caller.
//
// When ctx is done, the workers stop taking keys, the reconciles in progress
// get the shutdown grace to finish, then their contexts are cancelled, and Run
// returns nil once all of them, and everything Run started, have returned.
// If ctx's cause is ErrLeadershipLost there is no grace; under a Manager
// with a Lock, the grace ends at once if the lease is lost during it. Run may be called
// again after it returned (the Manager does on every new term), never twice
// at once.
func (c *Controller[K]) Run(ctx context.Context) error {
	r, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.end(r)
	return r.serve(ctx)
}

func (c *Controller[K]) begin(ctx context.Context) (*run[K], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return nil, fmt.Errorf("controller %q: already running", c.name)
	}
	c.keys.reset(c.limiter.Forget)
	if c.metrics != nil {
		c.metrics.parked.Set(0)
	}
	c.cur = newRun(ctx, c)
	return c.cur, nil
}

func (c *Controller[K]) end(r *run[K]) {
	c.gate.endRun(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == r {
		c.cur = nil
	}
}
