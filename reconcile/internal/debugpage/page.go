// Package debugpage serves the debug pages of a reconcile.Manager: an
// overview of its controllers, informers, leader and sharding, a page per
// controller and a page per key, in HTML (no script) and, with
// ?format=json or Accept: application/json, as JSON of the structs below.
//
// The structs are the pages' data and nothing else: they are internal so
// that the pages may change what they show without changing reconcile's
// API. The package knows the controllers only through Site and Controller,
// which reconcile implements; it owns the routes, the templates, the
// rendering and the guards (loopback clients and Host names only unless
// remote clients are allowed, no POST from another site).
package debugpage

import (
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/queue"
)

// How many lines the pages list at most.
const (
	// ReadyShown is how many of the next ready keys a controller lists.
	ReadyShown = 50
	// FailingShown is how many failing keys, and how many parked keys, a
	// controller lists.
	FailingShown = 20
	// BadKeysShown is how many bad keys the overview lists per informer.
	BadKeysShown = 20
	// MaxErrorBytes bounds the error messages the pages show; the full
	// length is shown beside them.
	MaxErrorBytes = 1024
)

// ErrorText formats err, truncated to MaxErrorBytes on a rune boundary,
// and returns its full length; "", 0 for nil.
func ErrorText(err error) (string, int) {
	if err == nil {
		return "", 0
	}
	s := err.Error()
	n := len(s)
	if n <= MaxErrorBytes {
		return s, n
	}
	cut := MaxErrorBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 { // a continuation byte
		cut--
	}
	return s[:cut], n
}

// Overview is the overview page's data.
type Overview struct {
	Controllers []ControllerInfo
	Informers   []InformerInfo
	// Leader is nil without leader election.
	Leader *leader.Status `json:",omitempty"`
	// Sharding is this replica's part in a sharded deployment: its
	// identity, the live members, the buckets it holds with their epochs,
	// those it is giving up (Releasing: moves in progress) and those it
	// wants but does not hold yet (Campaigning). Nil without sharding.
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
	// (informer.HeadRevisioner), shown as last told if the store has not
	// answered in time; HeadError is the last ask's error.
	Head      informer.Revision
	HeadKnown bool
	HeadError string `json:",omitempty"`
	// Lag is Head minus LastRevision, when HeadKnown.
	Lag informer.Revision
	// StalledFor is how long LastRevision has stood still behind Head;
	// Stuck says it passed the Manager's StuckAfter (/readyz fails).
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

// BadKeyLine is a key whose latest value its informer could not take (a
// value its Source could not decode, or the transform panicked on): see
// informer.BadKey.
type BadKeyLine struct {
	// Key is the key, rendered with fmt.Sprint.
	Key string
	// Revision is the revision of the value that could not be taken.
	Revision informer.Revision
	// Error says why, truncated to MaxErrorBytes; ErrorLen is its full
	// length.
	Error    string
	ErrorLen int
	// Since is when the key became bad, by the informer's clock.
	Since time.Time
	// HasValue says that the cache still holds an earlier, good value.
	HasValue bool
}

// ControllerInfo is a snapshot of a controller. Keys are rendered with
// fmt.Sprint.
type ControllerInfo struct {
	Name string
	// Running is true while the controller runs; the other fields but
	// Name, Workers and the failing keys are zero otherwise.
	Running bool
	// Workers is the configured number of workers; Busy, how many are in
	// a reconcile now.
	Workers, Busy int
	// Queue is the queue's depth by priority and group, its waiting and
	// processing keys and the oldest ready key's wait.
	Queue queue.Stats
	// Ready lists the next ready keys in the order workers take them, at
	// most ReadyShown.
	Ready []string
	// InFlight lists the reconciles in progress, oldest first.
	InFlight []InFlight
	// Failing lists the failing keys with the most attempts, at most
	// FailingShown, most attempts first; FailingTotal counts them all
	// (parked ones included).
	Failing      []KeyLine
	FailingTotal int
	// Parked lists parked keys, at most FailingShown; ParkedTotal counts
	// them all.
	Parked      []KeyLine
	ParkedTotal int
	// WaitingForWrites counts keys kept back until an informer has their
	// reconcile's own writes.
	WaitingForWrites int
	// Reconciles counts the reconciles started since the controller was
	// made.
	Reconciles uint64
}

// InFlight is one reconcile in progress.
type InFlight struct {
	Key         string
	ReconcileID string
	Started     time.Time
	Age         time.Duration
	// Triggers are why it runs.
	Triggers []Trigger `json:",omitempty"`
}

// KeyLine is a failing or parked key.
type KeyLine struct {
	Key      string
	Attempts int
	// LastError is truncated to MaxErrorBytes; LastErrorLen is its full
	// length in bytes.
	LastError    string
	LastErrorLen int
	NextRetry    time.Time `json:",omitzero"`
	Parked       bool
	Terminal     bool
}

// Trigger is one reason a key was queued, as reconcile.Trigger renders
// it: Kind and Change by name, Text as its String.
type Trigger struct {
	Kind   string
	Watch  string            `json:",omitempty"`
	Change string            `json:",omitempty"`
	Rev    informer.Revision `json:",omitempty"`
	First  time.Time         `json:",omitzero"`
	Count  int
	// Text is the whole reason in one line, as logs show it.
	Text string `json:"-"`
}

// String returns Text.
func (t Trigger) String() string { return t.Text }

// KeyInfo is what a controller knows about one key.
type KeyInfo struct {
	// Key is the key, rendered with fmt.Sprint.
	Key string
	// Phase is where the key is in the queue ("ready", "waiting",
	// "processing", "dirty"; "absent" if the queue does not hold it, and
	// "stopped" while the controller is not running). Priority, Due and
	// ReadySince are the queue's.
	Phase    string
	Priority int
	// Triggers are why the key is queued now, merged since a worker last
	// took it, oldest first; TriggersDropped counts the further reasons
	// not kept.
	Triggers        []Trigger `json:",omitempty"`
	TriggersDropped int       `json:",omitempty"`
	Due             time.Time `json:",omitzero"`
	ReadySince      time.Time `json:",omitzero"`
	// InFlight says that a reconcile of the key is in progress, started
	// at InFlightSince (zero unless the controller notes times), for
	// InFlightTriggers.
	InFlight         bool
	InFlightSince    time.Time `json:",omitzero"`
	InFlightTriggers []Trigger `json:",omitempty"`
	// Attempts, LastError (truncated to MaxErrorBytes, LastErrorLen is
	// its length), NextRetry, Parked and Terminal are the key's failures
	// since its last success.
	Attempts     int
	LastError    string
	LastErrorLen int
	NextRetry    time.Time `json:",omitzero"`
	Parked       bool
	Terminal     bool
	// LastSuccess is when the last successful reconcile among Recent
	// ended; zero if none is among them, or if the controller notes no
	// times.
	LastSuccess time.Time `json:",omitzero"`
	// LastDuration is how long the last of Recent took (zero if the
	// controller notes no times).
	LastDuration time.Duration
	// Recent lists the key's reconciles among the last ones each worker
	// remembers, newest first.
	Recent []ReconcileLine
	// Events are the key's recent events, newest first.
	Events []events.Event `json:",omitempty"`
	// Value is the key's value, only when values are shown and the key
	// has one.
	Value any `json:",omitempty"`
	// Bad is set while the informer holds the key bad: its latest value
	// could not be taken. Value, if shown, is then the last good one.
	Bad *BadKeyLine `json:",omitempty"`
}

// ReconcileLine is one finished reconcile.
type ReconcileLine struct {
	ReconcileID string
	Start       time.Time
	Duration    time.Duration
	// Result is the result label of controller_runtime_reconcile_total:
	// success, error, requeue, requeue_after.
	Result string
	// Error is truncated to MaxErrorBytes.
	Error string `json:",omitempty"`
	// Triggers are why it ran.
	Triggers []Trigger `json:",omitempty"`
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
