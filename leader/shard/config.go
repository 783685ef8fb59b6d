package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/leader"
)

// DefaultBuckets is the number of buckets unless Config.Buckets says
// otherwise: enough for a few dozen replicas to share evenly, few enough
// that their renewals (one per bucket per RetryPeriod) cost the store
// little.
const DefaultBuckets = 64

// Backend stores the Sharder's records: one leader.Lock per name, a
// listing of the records under a name prefix, and a compare-and-swap
// delete for the records of departed members. memlock.Locks,
// etcdlock.Locks and pglock.Locks implement it.
type Backend interface {
	// Lock returns the lock of the record called name, which need not
	// exist yet. Calls with the same name must return locks over the
	// same record.
	Lock(name string) leader.Lock
	// List returns every existing record whose name starts with prefix,
	// by name. Each record must be read atomically; the listing as a
	// whole need not be a snapshot.
	List(ctx context.Context, prefix string) (map[string]leader.Record, error)
	// Delete removes the record called name if it is still at version:
	// leader.ErrConflict if it is not, nil if there is no record. The
	// Sharder deletes only member records (gone for ForgetAfter), never a
	// bucket's, whose terms are fencing tokens; so a backend whose
	// re-created records restart their versions (pglock) is safe here.
	Delete(ctx context.Context, name string, version int64) error
}

// Config configures a Sharder. Name and Identity are required; every
// other field has a default used when it is left zero.
type Config struct {
	// Name prefixes every record: "<Name>/members/<Identity>" and
	// "<Name>/buckets/<n>". Replicas that share work share a Name and a
	// Backend. Required.
	Name string
	// Identity names this replica in the records; it must be non-empty,
	// unique per process (hostname plus a random suffix), and contain no
	// "/". Required.
	Identity string
	// Buckets is the number of buckets the keys are spread over. It must
	// be the same on every replica and must never change while any replica
	// runs (a different count moves almost every key). It bounds how many
	// replicas can share the work. Default: DefaultBuckets (64).
	Buckets int

	// LeaseDuration, RenewDeadline, RetryPeriod and JitterFactor are the
	// timings of every lease the Sharder holds (its membership record and
	// each bucket), with leader.Config's meaning, defaults and checks.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	JitterFactor  float64

	// ListPeriod is how often the Sharder lists the members and
	// recomputes which buckets it should hold. Default: RetryPeriod.
	ListPeriod time.Duration
	// SuspectAfter is how long a member's record may stay unchanged
	// before this replica also campaigns for the buckets that member
	// would lose if it were gone, so that the bucket records are already
	// being timed when the member expires (see the package doc). It must
	// be longer than RetryPeriod×JitterFactor and shorter than
	// LeaseDuration. Default: 2.5×RetryPeriod, capped below LeaseDuration.
	SuspectAfter time.Duration

	// ForgetAfter is how long a member's record may stay unchanged after
	// it expired (or was released) before a replica deletes it: a
	// replica that never returns leaves
	// no record behind. Any replica may delete, with compare-and-swap on
	// the record's version, so a member that renews meanwhile keeps its
	// record; one that was paused past it recreates its record when it
	// resumes. Negative: never delete. Default: 3×LeaseDuration.
	ForgetAfter time.Duration

	// Clock is the clock for all timing. Default: the real clock.
	Clock clock.WithTicker
}

// ErrInvalidConfig wraps every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("shard: invalid config")

func (c Config) withDefaults() Config {
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = leader.DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = leader.DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = leader.DefaultRetryPeriod
	}
	if c.JitterFactor == 0 {
		c.JitterFactor = leader.DefaultJitterFactor
	}
	if c.ListPeriod == 0 {
		c.ListPeriod = c.RetryPeriod
	}
	if c.SuspectAfter == 0 {
		c.SuspectAfter = min(c.RetryPeriod*5/2, (c.RenewDeadline+c.LeaseDuration)/2)
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = 3 * c.LeaseDuration
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// electorConfig is the leader.Config of one of the Sharder's leases.
func (c Config) electorConfig() leader.Config {
	return leader.Config{
		Identity: c.Identity, LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline,
		RetryPeriod: c.RetryPeriod, JitterFactor: c.JitterFactor, ReleaseOnCancel: true, Clock: c.Clock,
	}
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Name == "":
		return bad("empty Name")
	case c.Identity == "":
		return bad("empty Identity")
	case strings.Contains(c.Identity, "/"):
		return bad("Identity %q contains a /", c.Identity)
	case c.Buckets < 0:
		return bad("Buckets %d must be positive", c.Buckets)
	case c.ListPeriod < 0:
		return bad("ListPeriod %v must be positive", c.ListPeriod)
	case float64(c.SuspectAfter) <= c.JitterFactor*float64(c.RetryPeriod) || c.SuspectAfter >= c.LeaseDuration:
		return bad("SuspectAfter %v must be longer than JitterFactor×RetryPeriod (%v) and shorter than LeaseDuration %v",
			c.SuspectAfter, time.Duration(c.JitterFactor*float64(c.RetryPeriod)), c.LeaseDuration)
	}
	// The lease timings are checked by the leader package, once.
	if _, err := leader.New(nopLock{}, c.electorConfig()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// nopLock lets validate ask leader.New to check the timings.
type nopLock struct{ leader.Lock }
