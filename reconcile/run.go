package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/workqueue"
)

// run is one Run of a controller: its queue, workers and watches.
type run[K comparable] struct {
	c *Controller[K]
	q *workqueue.Queue[K]

	// workCtx is the parent of every reconcile's context: it carries the
	// values of Run's context (a leader's term) but is cancelled only when
	// the shutdown grace is over.
	workCtx    context.Context
	cancelWork context.CancelFunc

	// stopping is set when Run's context is done: workers stop taking keys.
	stopping atomic.Bool
	// synced is set once every watched informer's cache holds its first
	// list and the workers are started.
	synced atomic.Bool
	// failc carries the first failure of a FromFunc source.
	failc chan error

	regsMu sync.Mutex
	// regs are the informer handlers this run added; guarded by regsMu.
	regs []interface{ Idle() bool }
	// delivered holds, per informer this run watches, its handlers'
	// Registration.AfterRevision: the read-your-writes gate wakes a key
	// once they have been given the write's change (see gate.arm).
	// Guarded by regsMu.
	delivered map[informer.Revisioned][]afterRevision

	// inflight maps keys being reconciled to their cancel functions, with
	// WithCancelOnChange only; guarded by inflightMu.
	inflightMu sync.Mutex
	inflight   map[K]context.CancelCauseFunc

	// reasons says that keys keep their trigger reasons (trigger.go).
	reasons bool

	// slots are the workers' (inspect.go), one each.
	slots []workerSlot[K]
	// timed says that reconciles read the clock for their start and
	// duration: metrics or debug pages use them. Without either, the
	// slots and rings record no times, and a reconcile reads no clock.
	timed bool
}

// errChanged is the cause of a reconcile's context cancelled by a change
// to its key (WithCancelOnChange).
var errChanged = errors.New("key changed")

func newRun[K comparable](ctx context.Context, c *Controller[K]) *run[K] {
	opts := []workqueue.Option{
		workqueue.WithClock(c.s.clock),
		workqueue.WithRateLimiter[K](recordingLimiter[K]{c}),
		workqueue.WithMetrics(c.queueMetrics),
	}
	if c.groupOf != nil {
		opts = append(opts, workqueue.WithGroup(c.groupOf))
	}
	if c.s.ageing > 0 {
		opts = append(opts, workqueue.WithAgeing(c.s.ageing))
	}
	debug := c.debug.Load()
	if debug {
		opts = append(opts, workqueue.WithReadyTimes())
	}
	reasons := c.s.debug.triggers == 1 || (c.s.debug.triggers == 0 && debug)
	if reasons {
		opts = append(opts, workqueue.WithReasons())
	}
	r := &run[K]{c: c, q: workqueue.New[K](opts...), failc: make(chan error, 1), slots: make([]workerSlot[K], c.s.workers),
		timed: debug || c.metrics != nil, reasons: reasons}
	r.workCtx, r.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	if c.s.cancelOnChange {
		r.inflight = make(map[K]context.CancelCauseFunc)
	}
	return r
}

// recordingLimiter is the controller's rate limiter, noting each retry's
// time for Controller.Status.
type recordingLimiter[K comparable] struct{ c *Controller[K] }

func (l recordingLimiter[K]) When(key K) time.Duration {
	d := l.c.limiter.When(key)
	l.c.keys.retryAt(key, l.c.s.clock.Now().Add(d))
	return d
}
func (l recordingLimiter[K]) Forget(key K)          { l.c.limiter.Forget(key) }
func (l recordingLimiter[K]) NumRequeues(key K) int { return l.c.limiter.NumRequeues(key) }

var _ backoff.Limiter[string] = recordingLimiter[string]{}

func (r *run[K]) serve(ctx context.Context) (err error) {
	defer r.cancelWork()
	defer r.q.ShutDown()
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for _, w := range r.c.watches {
		stop, err := w.start(r)
		if err != nil {
			return fmt.Errorf("controller %q: %w", r.c.name, err)
		}
		stops = append(stops, stop)
	}
	if err := r.waitForSync(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if r.waitForHead(ctx); ctx.Err() != nil { // headbarrier.go
		return nil
	}
	r.synced.Store(true)
	r.growForLists()
	var wg sync.WaitGroup
	for i := range r.slots {
		wg.Go(func() { r.work(&r.slots[i]) })
	}
	select {
	case <-ctx.Done():
	case err = <-r.failc:
	}
	r.stopping.Store(true)
	r.q.ShutDown()
	grace := r.c.s.grace
	if errors.Is(context.Cause(ctx), ErrLeadershipLost) {
		grace = 0
	}
	if grace == 0 {
		r.cancelWork()
	} else {
		t := r.c.s.clock.AfterFunc(grace, r.cancelWork)
		defer t.Stop()
		// Under a Manager with leader election the grace runs under a
		// renewed lease; it ends at once if the lease is lost.
		if lease := leaseFrom(ctx); lease != nil {
			stop := context.AfterFunc(lease, r.cancelWork)
			defer stop()
		}
	}
	wg.Wait()
	return err
}

// listSizer is a watch that queues one key per entry of an informer's
// cache (informerWatch of For).
type listSizer[K comparable] interface {
	listKeys(r *run[K]) (int, bool)
	revisioned() informer.Revisioned
}

// growForLists makes room in the queue, before the workers start, for the
// keys of the watched informers' lists that the handlers have not queued
// yet: the handlers are still handing them over when the caches are
// synced, and without the room the queue grows step by step and, each
// time the workers empty it, drops and regrows its memory. The
// reservation ends once the handlers have been given those lists.
func (r *run[K]) growForLists() {
	total := 0
	var infs []informer.Revisioned
	for _, w := range r.c.watches {
		if s, ok := w.(listSizer[K]); ok {
			if n, ok := s.listKeys(r); ok && n > 0 {
				total += n
				infs = append(infs, s.revisioned())
			}
		}
	}
	if total == 0 {
		r.q.EndGrow() // what a watch's start reserved, if anything
		return
	}
	r.q.GrowTo(total)
	var left atomic.Int32
	left.Store(int32(len(infs)))
	for _, inf := range infs {
		r.afterDelivered(inf, inf.LastRevision(), func() {
			if left.Add(-1) == 0 {
				r.q.EndGrow()
			}
		})
	}
}

// waitForSync waits for every watched informer's first list to be in its
// cache, at most the sync timeout: the workers then start while the
// handlers still queue the listed keys (at low priority, behind fresh
// changes), so queueing and reconciling overlap. It returns nil if ctx is
// done first.
func (r *run[K]) waitForSync(ctx context.Context) error {
	caches := r.c.Caches()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := r.c.s.clock.AfterFunc(r.c.s.syncTimeout, cancel)
	defer t.Stop()
	var failed []string
	for _, cache := range caches {
		if err := cache.WaitForCache(sctx); err != nil && ctx.Err() == nil {
			failed = append(failed, fmt.Sprintf("%q (%v)", cache.Name(), err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("controller %q: informers did not sync within %v: %s",
			r.c.name, r.c.s.syncTimeout, strings.Join(failed, ", "))
	}
	return nil
}

// track records an informer handler, for idle.
// afterRevision is an informer's or a handler registration's AfterRevision.
type afterRevision = func(rev informer.Revision, f func()) (stop func() bool)

// track records a handler this run added to inf.
func (r *run[K]) track(inf informer.Revisioned, reg interface{ Idle() bool }, after afterRevision) {
	r.regsMu.Lock()
	defer r.regsMu.Unlock()
	r.regs = append(r.regs, reg)
	if r.delivered == nil {
		r.delivered = make(map[informer.Revisioned][]afterRevision)
	}
	r.delivered[inf] = append(r.delivered[inf], after)
}

// afterDelivered calls f once inf has reached rev and every handler this
// run added to inf has been given the changes up to there, so that a
// change the handlers map to a key is queued before f runs; or, if the run
// added no handler to inf, once inf has reached rev.
func (r *run[K]) afterDelivered(inf informer.Revisioned, rev informer.Revision, f func()) (stop func() bool) {
	r.regsMu.Lock()
	afters := r.delivered[inf]
	r.regsMu.Unlock()
	if len(afters) == 0 {
		return inf.AfterRevision(rev, f)
	}
	if len(afters) == 1 {
		return afters[0](rev, f)
	}
	var left atomic.Int32
	left.Store(int32(len(afters)))
	stops := make([]func() bool, len(afters))
	for i, after := range afters {
		stops[i] = after(rev, func() {
			if left.Add(-1) == 0 {
				f()
			}
		})
	}
	return func() bool {
		prevented := false
		for _, stop := range stops {
			prevented = stop() || prevented
		}
		return prevented
	}
}

func (r *run[K]) idle() bool {
	if !r.synced.Load() || r.stopping.Load() {
		return false
	}
	r.regsMu.Lock()
	for _, reg := range r.regs {
		if !reg.Idle() {
			r.regsMu.Unlock()
			return false
		}
	}
	r.regsMu.Unlock()
	// The gate before the queue: a parked key's callback that fires in
	// between has queued the key by the time the queue is checked.
	return !r.c.gate.busy() && r.q.Idle()
}

// fail ends the run with err, unless it is ending already.
func (r *run[K]) fail(err error) {
	select {
	case r.failc <- err:
	default:
	}
}

// enqueueEvent says how a watch queues a key.
type enqueueEvent struct {
	prio int
	// change is false for a resync or relist re-delivery: it queues the
	// key but cancels no reconcile in flight (WithCancelOnChange), since
	// nothing is known to have changed; a reconcile longer than the
	// resync period would otherwise never finish.
	change bool
	// why is the trigger reason the key is queued with (trigger.go);
	// zero when reasons are off.
	why workqueue.Reason
}

// enqueueAll queues keys that a watch delivered.
func (r *run[K]) enqueueAll(ev enqueueEvent, keys []K) {
	for _, k := range keys {
		r.enqueue(ev, k)
	}
}

// enqueue queues a key that a watch delivered: it unparks it (anything
// watched for it was delivered again), cancels its reconcile in flight if
// the delivery is a change and WithCancelOnChange is set, and adds it.
func (r *run[K]) enqueue(ev enqueueEvent, key K) {
	if r.c.shards != nil && !r.c.shards.admits(key, ev) {
		return // another replica's key (WithShards)
	}
	if r.c.keys.unpark(key) {
		r.q.Forget(key)
		if m := r.c.metrics; m != nil {
			m.parked.Dec()
		}
	}
	if ev.change && r.inflight != nil {
		r.inflightMu.Lock()
		if cancel, ok := r.inflight[key]; ok {
			cancel(errChanged)
		}
		r.inflightMu.Unlock()
	}
	r.q.AddWithOptions(workqueue.AddOptions{Priority: ev.prio, Reason: ev.why}, key)
}

// recoverWatch recovers a panic in a watch's predicate, key mapping or
// enqueue of key, logs it with its stack and counts it. Deferred directly.
// It is generic in the key's type, so that deferring it costs no
// conversion of the key to an interface (an allocation per change) unless
// something panicked.
func recoverWatch[K comparable, WK any](r *run[K], w watch[K], key WK) {
	p := recover()
	if p == nil {
		return
	}
	if m := r.c.metrics; m != nil {
		m.watchPanics.Inc()
	}
	r.c.s.logger.Error("watch panicked; change dropped", "watch", w.describe(), "watchedKey", key,
		"panic", p, "stack", string(debug.Stack()))
}

// work is one worker: it reconciles keys until the queue shuts down.
func (r *run[K]) work(slot *workerSlot[K]) {
	var why workqueue.Reasons // reused: handing reasons over allocates nothing
	key, shutdown := r.q.GetWithReasons(&why)
	for !shutdown {
		if parked := !r.stopping.Load() && r.process(slot, key, &why); parked {
			r.q.Done(key)
			r.c.gate.arm(r, key) // once the key is given back, not once the next comes
			key, shutdown = r.q.GetWithReasons(&why)
			continue
		}
		// One hold of the queue's lock for giving key back and taking
		// the next.
		key, shutdown = r.q.DoneAndGet(key, &why)
	}
}

// process reconciles key once and acts on the outcome, unless the
// read-your-writes gate parks key: it then reports true, and the worker
// arms the key's wake-up once it has given the key back.
func (r *run[K]) process(slot *workerSlot[K], key K, why *workqueue.Reasons) (parked bool) {
	c := r.c
	// One atomic load unless some key waits.
	if c.gate.n.Load() != 0 && c.gate.check(r, key) {
		return true // no reconcile, no outcome
	}
	var held *heldBucket
	if c.shards != nil {
		if held = c.shards.begin(key); held == nil {
			r.q.Forget(key) // its bucket moved away while it waited
			return false
		}
		defer c.shards.end(held)
	}
	ctx, cancel, release := r.reconcileContext()
	if held != nil {
		ctx, release = held.scope(ctx, release)
	}
	defer release()
	if r.inflight != nil {
		r.inflightMu.Lock()
		r.inflight[key] = cancel
		r.inflightMu.Unlock()
		defer func() {
			r.inflightMu.Lock()
			delete(r.inflight, key)
			r.inflightMu.Unlock()
		}()
	}
	info := &reconcileInfo[K]{Context: ctx, c: c, key: key, id: c.ids.Add(1)}
	if why.Len() > 0 { // only with trigger reasons on
		info.why = new(triggerSet)
		info.why.set(why)
	}
	var label string
	var err error
	if c.s.tracer != nil {
		var span trace.Span
		info.Context, span = r.startSpan(ctx, info)
		defer func() { endSpan(span, label, err) }()
	}

	m := c.metrics
	if m != nil {
		m.active.Inc()
	}
	var start time.Time
	if r.timed {
		start = c.s.clock.Now()
	}
	slot.begin(key, info.id, start, info.why)
	res, err, panicked := r.call(info, key)
	label = r.settle(info, key, res, err, panicked)
	var took time.Duration
	if r.timed {
		took = c.s.clock.Since(start)
	}
	slot.end(took, label, err)
	if m != nil {
		m.duration.Observe(took.Seconds())
		m.active.Dec()
		m.result(label).Inc()
	}
	return false
}

// call runs the reconciler, turning a panic into an error.
func (r *run[K]) call(ctx *reconcileInfo[K], key K) (res Result, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = Result{}, fmt.Errorf("panic: %v", p), true
			ctx.log().Error("reconcile panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	res, err = r.c.rec.Reconcile(ctx, key)
	return res, err, false
}

// settle acts on a reconcile's outcome and returns its result label.
func (r *run[K]) settle(ctx *reconcileInfo[K], key K, res Result, err error, panicked bool) string {
	c, m := r.c, r.c.metrics
	cause := r.cancelled(ctx)
	if cause == cancelShutdown && err == nil {
		cause = "" // it did its work all the same: a success
	}
	if cause != "" {
		if err != nil {
			if m != nil {
				m.cancelled.WithLabelValues(cause).Inc()
			}
			ctx.log().Debug(cancelledMessages[cause], "error", err)
		}
		return labelRequeue
	}
	if err == nil {
		r.q.Forget(key)
		c.keys.succeeded(key)
		if res.RequeueAfter > 0 {
			d := res.RequeueAfter
			if c.s.jitter > 0 {
				d += time.Duration(rand.Float64() * c.s.jitter * float64(d))
			}
			r.q.AddWithOptions(workqueue.AddOptions{After: d, Reason: requeueReason}, key)
			return labelRequeueAfter
		}
		return labelSuccess
	}
	if m != nil {
		m.errors.Inc()
		if panicked {
			m.panics.Inc()
		}
	}
	if IsTerminal(err) {
		r.q.Forget(key)
		c.keys.terminal(key, err)
		if m != nil {
			m.terminal.Inc()
		}
		ctx.log().Error("reconcile failed with a terminal error; not retrying until the key changes", "error", err)
		return labelError
	}
	attempts, parked := c.keys.failed(key, err, c.s.maxAttempts)
	if parked {
		if m != nil {
			m.parked.Inc()
		}
		ctx.log().Error("reconcile failed; key parked until it changes", "error", err, "attempts", attempts)
		return labelError
	}
	if !panicked {
		ctx.log().Error("reconcile failed; retrying with backoff", "error", err, "attempts", attempts)
	}
	r.q.AddWithOptions(workqueue.AddOptions{RateLimited: true, Reason: backoffReason}, key)
	return labelError
}
