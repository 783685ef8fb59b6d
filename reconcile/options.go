package reconcile

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"go.opentelemetry.io/otel/trace"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/leader/shard"
)

// Defaults for the options of New.
const (
	// DefaultWorkers is the number of concurrent reconciles, as in
	// controller-runtime.
	DefaultWorkers = 1
	// DefaultSyncTimeout bounds how long Run waits for the watched informers'
	// first lists, as controller-runtime's CacheSyncTimeout.
	DefaultSyncTimeout = 2 * time.Minute
	// DefaultShutdownGrace is how long Run lets reconciles in flight finish
	// after its context is done, before it cancels theirs.
	DefaultShutdownGrace = 30 * time.Second
	// MaxWorkers is the most workers WithWorkers accepts. Reconciles
	// that wait on I/O gain nothing from more goroutines than a backend
	// has connections, and a value far above it is a typo (a million
	// workers took 15 s to stop).
	MaxWorkers = 10_000
)

// Option configures a Controller in New. Options that carry the controller's
// key type (watches, WithRateLimiter) are checked against it when New runs,
// and a mismatch is an error from New.
type Option func(*settings) error

// settings is what the options set; New copies it into the controller.
type settings struct {
	workers        int
	syncTimeout    time.Duration
	headBarrier    bool // WithHeadBarrier
	grace          time.Duration
	timeout        time.Duration // per reconcile; 0: none
	jitter         float64
	maxAttempts    int // 0: unlimited
	cancelOnChange bool
	logger         *slog.Logger
	registerer     prometheus.Registerer
	clock          Clock
	limiter        any           // backoff.Limiter[K], checked by New
	groupOf        any           // func(K) string, checked by New
	ageing         time.Duration // 0: the queue's default
	watches        []any         // watch[K] values, checked by New
	tracer         trace.Tracer
	rywTimeout     time.Duration  // read-your-writes (Wrote)
	owned          []ownsRelation // Owns's, applied by New once everything is checked
	debug          debugSettings  // what the debug pages and logs show (introspect.go)
	sharder        *shard.Sharder // WithShards
	shardKey       any            // func(K) string (WithShardKey), checked by New
}

func defaults() settings {
	return settings{
		workers:     DefaultWorkers,
		syncTimeout: DefaultSyncTimeout,
		grace:       DefaultShutdownGrace,
		clock:       clock.RealClock{},
		rywTimeout:  DefaultReadYourWritesTimeout,
	}
}

// WithWorkers sets how many keys are reconciled at once; one key is never
// reconciled by two workers at once. Each worker is a goroutine started by
// Run. n must be at least 1 and at most MaxWorkers. Default: DefaultWorkers
// (1).
func WithWorkers(n int) Option {
	return func(s *settings) error {
		if n < 1 {
			return fmt.Errorf("WithWorkers(%d): need at least one worker", n)
		}
		if n > MaxWorkers {
			return fmt.Errorf("WithWorkers(%d): more than MaxWorkers (%d)", n, MaxWorkers)
		}
		s.workers = n
		return nil
	}
}

// WithReconcileTimeout bounds each call of Reconcile: its context has a
// deadline d after the call starts, which ctx.Deadline reports, so that
// gRPC, HTTP and database clients see the budget; when it passes, ctx.Err()
// is context.DeadlineExceeded. The deadline follows the controller's clock
// (WithClock): under a fake clock, ctx is done when the fake clock reaches
// it, and ctx.Deadline reports the wall-clock instant d after the call
// started, which is what clients that read it expect. A reconcile that
// returns because of it returns an error, which is retried with backoff
// like any other. d must not be negative. Default: no timeout.
func WithReconcileTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return fmt.Errorf("WithReconcileTimeout(%v): negative", d)
		}
		s.timeout = d
		return nil
	}
}

// WithRequeueJitter spreads Result.RequeueAfter by up to the fraction f
// (0 ≤ f ≤ 1) more, uniformly, so that keys that asked for the same delay at
// the same time do not come back at the same instant. Default: 0, no jitter.
func WithRequeueJitter(f float64) Option {
	return func(s *settings) error {
		if !(f >= 0 && f <= 1) {
			return fmt.Errorf("WithRequeueJitter(%v): need 0 ≤ f ≤ 1", f)
		}
		s.jitter = f
		return nil
	}
}

// WithMaxAttempts parks a key after n consecutive failed reconciles (errors
// and panics): it is no longer retried, shows in Controller.Parked and in
// the converge_reconcile_parked_keys gauge, and is reconciled again as soon as
// anything watched for it changes. n must not be negative. Default: 0, retry
// forever (with backoff), as controller-runtime does.
func WithMaxAttempts(n int) Option {
	return func(s *settings) error {
		if n < 0 {
			return fmt.Errorf("WithMaxAttempts(%d): negative", n)
		}
		s.maxAttempts = n
		return nil
	}
}

// WithCancelOnChange cancels the context of a reconcile in progress when its
// key changes again (a watched informer reports a change that maps to it, or
// a FromFunc or FromChannel source delivers it), for reconciles that take
// long and whose work a change makes moot. The key is then reconciled again
// at once, and the cancelled call's outcome is counted as a requeue, not as a
// failure; an error it returned is logged at debug level and counted in
// converge_reconcile_cancelled_errors_total{cause="changed"}. A resync or relist re-delivery (Change.Resync) is not a change and
// never cancels. Default: off; a change waits for the reconcile in progress,
// and then runs it once more.
//
// A reconciler's own writes are changes too: a reconcile that writes a value
// it watches (a status on its own key, a child that maps back to it) is
// cancelled by its own write as soon as the informer delivers it. Make such
// a write the reconcile's last step, so that being cancelled after it costs
// nothing, or drop the change with a predicate (IgnoreUnchanged comparing
// only the fields the reconciler does not write).
func WithCancelOnChange() Option {
	return func(s *settings) error {
		s.cancelOnChange = true
		return nil
	}
}

// WithSyncTimeout bounds how long Run waits for every watched informer's
// first list before it returns an error naming the informers that did not
// sync. With WithHeadBarrier it also bounds, separately, the wait that
// follows for those informers to reach the store's head revision read when
// the caches synced (writes another replica made before this Run), after
// which the workers start anyway with a warning. d must be positive.
// Default: DefaultSyncTimeout (2 minutes).
func WithSyncTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("WithSyncTimeout(%v): need a positive duration", d)
		}
		s.syncTimeout = d
		return nil
	}
}

// WithShutdownGrace sets how long Run, once its context is done, lets the
// reconciles in progress finish before it cancels their contexts. Run then
// still waits for them to return. d must not be negative; 0 cancels them at
// once. When the context was cancelled because leadership was lost (its cause
// is ErrLeadershipLost), there is no grace: a deposed leader must stop acting.
// A reconcile whose context the shutdown cancelled is not a failure: its
// key is not retried or counted as failing (the next Run reconciles every
// key), and an error it returned is logged at debug level and counted in
// converge_reconcile_cancelled_errors_total{cause="shutdown"}.
// Under a Manager with a Lock, the lease is renewed throughout the grace, so
// no other replica leads while these reconciles finish, and if the lease is
// lost during the grace the reconciles are cancelled at once. Default:
// DefaultShutdownGrace (30s).
func WithShutdownGrace(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return fmt.Errorf("WithShutdownGrace(%v): negative", d)
		}
		s.grace = d
		return nil
	}
}

// WithLogger sets the logger. Every line the controller writes about a
// reconcile carries controller, key and reconcileID attributes, and so does
// the logger LoggerFrom returns inside Reconcile. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) error {
		if l == nil {
			return fmt.Errorf("WithLogger(nil)")
		}
		s.logger = l
		return nil
	}
}

// WithMetrics registers the controller's metrics on reg under
// controller-runtime's names (controller_runtime_reconcile_total and the
// rest, with a controller label), and its queue's under client-go's
// (workqueue_depth and the rest, with a name label), so existing dashboards
// work unchanged. Default: no metrics.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *settings) error {
		if reg == nil {
			return fmt.Errorf("WithMetrics(nil)")
		}
		s.registerer = reg
		return nil
	}
}

// Clock is the time a controller uses: k8s.io/utils/clock's RealClock and
// its testing package's FakeClock implement it.
type Clock interface {
	clock.WithTicker
	AfterFunc(d time.Duration, f func()) clock.Timer
}

// WithClock sets the clock for delays, backoff, timeouts and the shutdown
// grace; client-go's fake clock (k8s.io/utils/clock/testing) makes them
// deterministic. Default: the real clock.
func WithClock(clk Clock) Option {
	return func(s *settings) error {
		if clk == nil {
			return fmt.Errorf("WithClock(nil)")
		}
		s.clock = clk
		return nil
	}
}

// WithRateLimiter sets the retry policy for failed reconciles. Any
// backoff.Limiter[K] works, and so does every client-go or
// controller-runtime rate limiter (workqueue.TypedRateLimiter[K] has the
// same methods); K must be the controller's key type. Default: backoff.DefaultController, per-key
// exponential backoff from 5ms to 1000s, and 10 retries per second overall
// (burst 100), as in client-go and controller-runtime.
func WithRateLimiter[K comparable](l backoff.Limiter[K]) Option {
	return func(s *settings) error {
		if l == nil {
			return fmt.Errorf("WithRateLimiter(nil)")
		}
		s.limiter = l
		return nil
	}
}

// WithGroups turns on fairness between groups of keys (tenants,
// namespaces): within a priority, the queue serves the groups that group
// returns round-robin, so that one group's flood of keys cannot starve
// another's. group must be fast and return the same group for a key every
// time; K must be the controller's key type, or New fails. Default: no
// groups, first in first out within a priority.
func WithGroups[K comparable](group func(K) string) Option {
	return func(s *settings) error {
		if group == nil {
			return fmt.Errorf("WithGroups(nil)")
		}
		s.groupOf = group
		return nil
	}
}

// WithAgeing bounds how long a key waits behind keys of a higher priority:
// the controller queues the keys of an informer's initial list at a low
// priority, behind fresh changes, and a key that has waited for d is served
// next whatever its priority (see queue.WithAgeing). d must be positive, or
// queue.NoAgeing for strict priorities. Default: queue.DefaultAgeing (30s).
func WithAgeing(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("WithAgeing(%v): need a positive duration (or queue.NoAgeing)", d)
		}
		s.ageing = d
		return nil
	}
}
