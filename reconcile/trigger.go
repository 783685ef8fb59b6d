package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/workqueue"
)

// TriggerKind says what queued a key.
type TriggerKind uint8

const (
	// TriggerChange: a watched key changed (Trigger.Watch, Change, Rev).
	TriggerChange TriggerKind = iota + 1
	// TriggerInitialList: listed when the controller's Run started,
	// which under a Manager with leader election is when this replica
	// gained leadership.
	TriggerInitialList
	// TriggerResync: re-delivered unchanged by a periodic resync, or found
	// again by a relist after an expired revision (Change.Resync).
	TriggerResync
	// TriggerSource: a FromFunc or FromChannel source queued it.
	TriggerSource
	// TriggerRequeueAfter: the last reconcile returned RequeueAfter.
	TriggerRequeueAfter
	// TriggerBackoff: the last reconcile failed; this is its retry.
	TriggerBackoff
	// TriggerWroteWake: an informer caught up with the writes the key's
	// last reconcile recorded with Wrote (or it timed out).
	TriggerWroteWake
	// TriggerUnparked: a parked key was unparked (Controller.Unpark).
	TriggerUnparked
)

var triggerKindNames = [...]string{"", "change", "initial list", "resync", "source", "requeue after", "backoff", "writes seen", "unparked"}

// String names the kind in lower case: "change", "backoff".
func (k TriggerKind) String() string {
	if int(k) < len(triggerKindNames) && k != 0 {
		return triggerKindNames[k]
	}
	return "TriggerKind(" + strconv.Itoa(int(k)) + ")"
}

// Trigger is one reason a key was queued, merged over every add with the
// same reason since a worker last took the key. A controller keeps up to
// 4 of them per key (the first one always) when trigger
// reasons are on: see WithTriggerReasons.
//
// Triggers are for people (logs, spans, debug pages), never an input of
// Reconcile: a reconciler that acted on them would be edge-triggered, and
// wrong as soon as two changes coalesce into one reconcile.
type Trigger struct {
	Kind TriggerKind
	// Watch names the watch that queued the key (`informer "pods"`,
	// `source "webhook"`); empty for requeues and backoffs.
	Watch string `json:",omitempty"`
	// Change is the change's kind, for changes, initial lists and
	// resyncs.
	Change ChangeKind `json:",omitempty"`
	// Rev is the highest store revision of the merged changes, each the
	// revision of the change itself (see informer.RevisionHandler): a watch
	// event's own revision, a relist's for a key it found, the revision of
	// the cached value for a resync. Zero when unknown (initial lists,
	// sources, requeues).
	Rev informer.Revision `json:",omitempty"`
	// First is when the first of the merged adds happened; zero unless the
	// controller notes times (WithMetrics, or debug pages on).
	First time.Time `json:",omitzero"`
	// Count is how many adds were merged.
	Count int
}

// String renders the trigger for a log line: `informer "pods" updated rev
// 42 ×3`, `backoff`.
func (t Trigger) String() string {
	var b strings.Builder
	switch t.Kind {
	case TriggerChange, TriggerInitialList, TriggerResync:
		b.WriteString(t.Watch)
		if t.Change != 0 {
			b.WriteByte(' ')
			b.WriteString(t.Change.String())
		}
		if t.Kind != TriggerChange {
			b.WriteString(" (" + t.Kind.String() + ")")
		}
	case TriggerSource:
		b.WriteString(t.Watch)
	default:
		b.WriteString(t.Kind.String())
	}
	if t.Rev != 0 {
		b.WriteString(" rev ")
		b.WriteString(strconv.FormatUint(uint64(t.Rev), 10))
	}
	if t.Count > 1 {
		b.WriteString(" ×")
		b.WriteString(strconv.Itoa(t.Count))
	}
	return b.String()
}

// WithTriggerReasons makes the controller keep why each key is queued
// (see Trigger): every queued key keeps up to 4 reasons in
// its queue entry, merged as adds coalesce, handed to the worker with the
// key, and shown in the reconcile's log lines (a "trigger" attribute), its
// span (converge.triggers) and the debug pages. It costs about 100 bytes
// per queued key and one allocation per reconcile; the reason merges into
// the queue entry an add finds, so it adds no index lookup. Default: on
// under a Manager with Debug.Enabled (from the next Run after
// AddController), off otherwise; WithoutTriggerReasons keeps them off
// under the debug pages too. Of the two, the last given wins.
func WithTriggerReasons() Option {
	return func(s *settings) error {
		s.debug.triggers = 1
		return nil
	}
}

// WithoutTriggerReasons keeps the controller from keeping why each key is
// queued even under a Manager with Debug.Enabled, for a controller whose
// queue is too large to spend about 100 bytes per key on it: TriggersFrom
// then returns nil, and the debug pages show no reasons. Default: see
// WithTriggerReasons.
func WithoutTriggerReasons() Option {
	return func(s *settings) error {
		s.debug.triggers = 2
		return nil
	}
}

// TriggersFrom returns why the reconcile of ctx runs (the reasons its key
// was queued, oldest first), or nil outside a reconcile or with trigger
// reasons off. Call it while the reconcile runs. It is for logs and
// tests, not for deciding what to do: see Trigger.
func TriggersFrom(ctx context.Context) []Trigger {
	if info, ok := ctx.Value(infoKey{}).(infoOf); ok {
		return info.triggers()
	}
	return nil
}

// The encoding of a trigger in workqueue.Reason.What: kind in the low byte,
// the change kind in the next, the watch's index (+1; 0 for none) in the
// high 16 bits.
func reasonWhat(kind TriggerKind, change ChangeKind, watch int) uint32 {
	return uint32(kind) | uint32(change)<<8 | uint32(min(watch+1, 0xFFFF))<<16
}

// triggerSet is the triggers of one reconcile in the compact form the
// queue hands over: copied into the reconcile's context and the worker's
// slot and ring, decoded only when read.
type triggerSet struct {
	recs    [workqueue.MaxReasons]triggerRec
	n       uint8
	dropped uint32
}

type triggerRec struct {
	what, count uint32
	rev         uint64
}

// set copies the reasons the queue handed over.
func (t *triggerSet) set(rs *workqueue.Reasons) {
	l := rs.List()
	for i := range l {
		t.recs[i] = triggerRec{what: l[i].What, count: l[i].Count, rev: l[i].Rev}
	}
	t.n, t.dropped = uint8(len(l)), rs.Dropped
}

// decodeTrigger turns a queue record into a Trigger, naming its watch.
func (c *Controller[K]) decodeTrigger(what uint32, rev uint64, count uint32, first time.Time) Trigger {
	t := Trigger{Kind: TriggerKind(what & 0xFF), Change: ChangeKind(what >> 8 & 0xFF), Rev: informer.Revision(rev), First: first, Count: int(count)}
	if w := int(what>>16) - 1; w >= 0 && w < len(c.watches) {
		t.Watch = c.watches[w].describe()
	}
	return t
}

// triggers decodes a set; nil for none.
func (c *Controller[K]) triggers(t *triggerSet) []Trigger {
	if t == nil || t.n == 0 {
		return nil
	}
	out := make([]Trigger, t.n)
	for i := range t.n {
		r := &t.recs[i]
		out[i] = c.decodeTrigger(r.what, r.rev, r.count, time.Time{})
	}
	return out
}

// queuedTriggers decodes the reasons the queue holds for a key.
func (c *Controller[K]) queuedTriggers(rs *workqueue.Reasons) []Trigger {
	var out []Trigger
	for _, r := range rs.List() {
		out = append(out, c.decodeTrigger(r.What, r.Rev, r.Count, r.First))
	}
	return out
}

// triggerText renders triggers for a log line or span: "; "-separated,
// with the number of reasons dropped.
func triggerText(ts []Trigger, dropped uint32) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t.String())
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "; %d more dropped", dropped)
	}
	return b.String()
}

// The reasons of the controller's own requeues.
var (
	requeueReason = workqueue.Reason{What: reasonWhat(TriggerRequeueAfter, 0, -1)}
	backoffReason = workqueue.Reason{What: reasonWhat(TriggerBackoff, 0, -1)}
	wroteReason   = workqueue.Reason{What: reasonWhat(TriggerWroteWake, 0, -1)}
)
