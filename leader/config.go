package leader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"k8s.io/utils/clock"
)

// Defaults for Config: client-go's leader election numbers (see the package
// doc for how JitterFactor differs).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultJitterFactor  = 1.2
)

// Config configures an Elector. Identity is required; every other field has
// a default used when it is left zero.
type Config struct {
	// Identity names this elector in the lock. It must be non-empty and
	// unique per process (e.g. hostname plus a random suffix): an elector
	// that finds its own identity in the record while not leading takes it
	// over at once, as a restart of the same process would.
	Identity string

	// LeaseDuration is how long a candidate waits, on its own clock, after
	// last seeing the record change before it takes the lock over from a
	// holder that stopped renewing. It bounds how long a crashed leader's
	// lease blocks the others. Default: DefaultLeaseDuration (15s).
	LeaseDuration time.Duration

	// RenewDeadline is how long, after the start of its last successful
	// renewal, a leader keeps leading while renewals fail; then it cancels
	// the leader's context. It must be shorter than LeaseDuration; the
	// difference is the margin for clock drift and for the leader's work to
	// notice cancellation (see the package doc). Default:
	// DefaultRenewDeadline (10s).
	RenewDeadline time.Duration

	// RetryPeriod is how often a leader renews and, before jitter, how
	// often a candidate tries to acquire. Default: DefaultRetryPeriod (2s).
	RetryPeriod time.Duration

	// JitterFactor spreads a candidate's waits uniformly over
	// [RetryPeriod, JitterFactor×RetryPeriod] so that candidates do not
	// retry in lockstep. It must be a finite number, at least 1; 1 means no jitter.
	// RenewDeadline must exceed JitterFactor×RetryPeriod, so that a leader
	// has time for more than one renewal attempt. Default:
	// DefaultJitterFactor (1.2).
	JitterFactor float64

	// ReleaseOnCancel makes Run, when its context is cancelled while
	// leading, write an empty holder into the lock after OnStartedLeading
	// has returned, so that another candidate takes over within one retry
	// period instead of waiting LeaseDuration. Only set it if the leader's
	// work really stops when its context is cancelled. Default: false.
	ReleaseOnCancel bool

	// OnStartedLeading is called in its own goroutine when this elector
	// becomes leader, with a context that carries the term (see
	// TermFromContext) and is cancelled when leadership ends or Run's
	// context is done. It should return promptly once ctx is done: Run does
	// not campaign again, call OnStoppedLeading or return until it has.
	// After Run's context is done the elector keeps renewing the lease until
	// it returns, so work it finishes then cannot overlap the next leader's;
	// after leadership is lost it cannot. Default: nothing.
	OnStartedLeading func(ctx context.Context)

	// OnStoppedLeading is called after a term ends, once OnStartedLeading
	// has returned, on Run's goroutine. Default: nothing.
	OnStoppedLeading func()

	// OnNewLeader is called, on Run's goroutine, whenever this elector sees
	// a different holder in the lock, including itself. It is not called
	// for a released lock. Default: nothing.
	OnNewLeader func(identity string)

	// Clock is the clock for all timing; client-go's fake clock
	// (k8s.io/utils/clock/testing) makes tests deterministic. Default: the
	// real clock.
	Clock clock.WithTicker
}

// ErrInvalidConfig wraps every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("leader: invalid config")

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.JitterFactor == 0 {
		c.JitterFactor = DefaultJitterFactor
	}
	if c.OnStartedLeading == nil {
		c.OnStartedLeading = func(context.Context) {}
	}
	if c.OnStoppedLeading == nil {
		c.OnStoppedLeading = func() {}
	}
	if c.OnNewLeader == nil {
		c.OnNewLeader = func(string) {}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// validate checks a Config that has its defaults applied; set is the Config
// as the caller gave it, so that an error can say which of the values it
// names are defaults the caller never set.
func (c Config) validate(set Config) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	// Each value as the errors show it: with "(the default)" if the caller
	// left the field zero, so that an error about a value the caller never
	// wrote does not read as if they had.
	show := func(v any, defaulted bool) string {
		if defaulted {
			return fmt.Sprintf("%v (the default)", v)
		}
		return fmt.Sprint(v)
	}
	lease := show(c.LeaseDuration, set.LeaseDuration == 0)
	renew := show(c.RenewDeadline, set.RenewDeadline == 0)
	retry := show(c.RetryPeriod, set.RetryPeriod == 0)
	jitter := show(c.JitterFactor, set.JitterFactor == 0)
	switch {
	case c.Identity == "":
		return bad("Identity must not be empty")
	case c.LeaseDuration < 0:
		return bad("LeaseDuration %v must be positive", c.LeaseDuration)
	case c.RenewDeadline < 0:
		return bad("RenewDeadline %v must be positive", c.RenewDeadline)
	case c.RetryPeriod < 0:
		return bad("RetryPeriod %v must be positive", c.RetryPeriod)
	case math.IsNaN(c.JitterFactor) || math.IsInf(c.JitterFactor, 0):
		// NaN fails every comparison below, and either would make the
		// candidate's wait negative: a loop hammering the Lock.
		return bad("JitterFactor %v must be a finite number, at least 1", c.JitterFactor)
	case c.JitterFactor < 1:
		return bad("JitterFactor %v must be at least 1", c.JitterFactor)
	case c.RenewDeadline >= c.LeaseDuration:
		return bad("RenewDeadline %s must be shorter than LeaseDuration %s", renew, lease)
	case float64(c.RenewDeadline) <= c.JitterFactor*float64(c.RetryPeriod):
		return bad("RenewDeadline %s must be longer than JitterFactor %s × RetryPeriod %s", renew, jitter, retry)
	}
	return nil
}
