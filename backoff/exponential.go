package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"time"
)

// Defaults used by [Exponential] for fields left at their zero value. They
// match client-go's DefaultTypedControllerRateLimiter, so a program moving
// from client-go keeps the retry timing it was tuned for.
const (
	DefaultBase   = 5 * time.Millisecond
	DefaultCap    = 1000 * time.Second
	DefaultFactor = 2.0
)

// Jitter selects how [Exponential.Delay] randomises a delay. Randomising
// spreads out retries of keys that failed together (a store outage fails
// every key at once), so they do not all hit the store again in one burst.
type Jitter int

const (
	// NoJitter returns the computed delay unchanged: predictable, but keys
	// that failed together retry together.
	NoJitter Jitter = iota
	// FullJitter returns a delay drawn uniformly from [0, d]. It spreads
	// retries the most, at the price of sometimes retrying almost at once.
	FullJitter
	// EqualJitter returns d/2 plus a delay drawn uniformly from [0, d/2]
	// (so a value in [d/2, d]): it keeps at least half of the backoff while
	// still spreading retries.
	EqualJitter
)

// String returns the constant's name, or Jitter(n) for a value that is not
// one of the constants.
func (j Jitter) String() string {
	switch j {
	case NoJitter:
		return "NoJitter"
	case FullJitter:
		return "FullJitter"
	case EqualJitter:
		return "EqualJitter"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// Exponential computes exponential backoff delays: Base*Factor^attempt,
// capped at Cap, then jittered. It holds no state, so one value can be
// shared and copied freely (but see Rand).
//
// The zero value is ready to use and gives client-go's controller defaults:
// 5ms doubling up to 1000s, without jitter. A zero field takes its default,
// which is why a zero Base or Cap cannot be expressed.
//
// Delay never fails: settings that [Exponential.Validate] rejects are
// replaced by something usable (see each field), because a retry loop that
// panics or stops retrying over a bad setting is worse than one that retries
// at a default pace. Call Validate where the settings come from a user.
type Exponential struct {
	// Base is the delay before jitter for attempt 0. Zero or negative means
	// DefaultBase (5ms). A Base above Cap is lowered to Cap.
	Base time.Duration

	// Cap is the largest delay Delay returns, before and after jitter.
	// Zero or negative means DefaultCap (1000s). Cap is a hard ceiling:
	// when Cap is left at its default and Base is above 1000s, every delay
	// is 1000s, which Validate reports.
	Cap time.Duration

	// Factor multiplies the delay after each attempt. Zero means
	// DefaultFactor (2). A Factor below 1 (which would make delays shrink),
	// NaN or infinite also means DefaultFactor. A Factor of exactly 1 gives
	// a constant delay of Base.
	Factor float64

	// Jitter randomises each delay; the default, NoJitter, does not. An
	// unknown value behaves as NoJitter.
	Jitter Jitter

	// Rand, if not nil, is the random source for Jitter, so that tests can
	// seed it and get a reproducible sequence. A *rand.Rand is not safe for
	// concurrent use: a caller that calls Delay from several goroutines must
	// serialise those calls ([PerKey] does so under its own mutex), and must
	// not share one Rand between values used concurrently. Copies of an
	// Exponential share its Rand. Nil means math/rand/v2's global source,
	// which is safe for concurrent use and is what production code wants.
	Rand *rand.Rand
}

// Validate reports every setting that Delay would have to replace, joined
// into one error, or nil if Delay uses the settings as given. Zero fields are
// valid: they mean the defaults.
func (e Exponential) Validate() error {
	var errs []error
	if e.Base < 0 {
		errs = append(errs, fmt.Errorf("backoff: Base %v is negative", e.Base))
	}
	if e.Cap < 0 {
		errs = append(errs, fmt.Errorf("backoff: Cap %v is negative", e.Cap))
	}
	switch {
	case math.IsNaN(e.Factor) || math.IsInf(e.Factor, 0):
		errs = append(errs, fmt.Errorf("backoff: Factor %v is not a finite number", e.Factor))
	case e.Factor != 0 && e.Factor < 1:
		errs = append(errs, fmt.Errorf("backoff: Factor %v is below 1, so delays would shrink", e.Factor))
	}
	// Compared with the effective cap, so that a large Base with Cap left
	// at its default is caught too.
	if _, limit, _ := e.settings(); e.Base > limit {
		errs = append(errs, fmt.Errorf("backoff: Base %v is above the cap %v, so every delay would be the cap", e.Base, limit))
	}
	if e.Jitter < NoJitter || e.Jitter > EqualJitter {
		errs = append(errs, fmt.Errorf("backoff: unknown %v", e.Jitter))
	}
	return errors.Join(errs...)
}

// settings returns the values Delay actually uses, after defaults and
// repairs: 0 < base <= limit and factor >= 1 and finite.
func (e Exponential) settings() (base, limit time.Duration, factor float64) {
	base, limit, factor = e.Base, e.Cap, e.Factor
	if base <= 0 {
		base = DefaultBase
	}
	if limit <= 0 {
		limit = DefaultCap
	}
	base = min(base, limit)
	if !(factor >= 1) || math.IsInf(factor, 1) {
		factor = DefaultFactor
	}
	return base, limit, factor
}

// Delay returns the delay to wait before retry number attempt (0 for the
// first retry): Base*Factor^attempt capped at Cap, then jittered. A
// negative attempt counts as 0.
//
// The result is always in [0, Cap] (with defaults and repairs applied as
// documented on the fields), for any attempt and any settings: large
// attempts or factors saturate at Cap instead of overflowing. Without
// jitter the result never decreases as attempt grows, even for a Factor
// barely above 1, because the power is computed exactly enough that
// rounding cannot reorder neighbouring attempts.
func (e Exponential) Delay(attempt int) time.Duration {
	d := e.capped(attempt)
	switch e.Jitter {
	case FullJitter:
		return time.Duration(e.uniform(uint64(d)))
	case EqualJitter:
		half := d / 2
		return d - half + time.Duration(e.uniform(uint64(half)))
	}
	return d
}

// capped returns Base*Factor^attempt capped at Cap, without jitter.
func (e Exponential) capped(attempt int) time.Duration {
	base, limit, factor := e.settings()
	if attempt <= 0 || factor == 1 || base == limit {
		return base
	}
	if factor == math.Trunc(factor) {
		return intPower(base, limit, factor, attempt)
	}
	return fracPower(base, limit, factor, attempt)
}

// intPower multiplies in integers, which is exact, and is the path the
// default Factor of 2 takes. It needs at most 63 steps because each one at
// least doubles the delay, and it stops before any product could overflow.
func intPower(base, limit time.Duration, factor float64, attempt int) time.Duration {
	if factor >= float64(limit) { // also keeps the conversion below in range
		return limit
	}
	f := time.Duration(factor)
	d := base
	for range attempt {
		if d > limit/f {
			return limit
		}
		d *= f
	}
	return d
}

// fracPrec is the precision of fracPower's arithmetic. Ordering neighbouring
// attempts needs a relative error well below Factor-1 >= 2^-52; squaring
// amplifies the error by up to the exponent, which the cut-off in fracPower
// keeps below 2^59. 192 bits leaves a wide margin.
const fracPrec = 192

// fracPower handles fractional factors. float64 math.Pow is not monotonic
// in the exponent for a factor just above 1 (its error grows with the
// exponent and swamps the step between attempts), so it only decides when
// the result is certainly far above the cap; the value itself is computed
// with big.Float.
func fracPower(base, limit time.Duration, factor float64, attempt int) time.Duration {
	// ln(limit/base) <= ln(2^63) < 44; the margin of 1 dwarfs float error,
	// and the product is monotonic in attempt, so the cut-off is too.
	if float64(attempt)*math.Log(factor) > math.Log(float64(limit)/float64(base))+1 {
		return limit
	}
	x := new(big.Float).SetPrec(fracPrec).SetFloat64(factor)
	p := new(big.Float).SetPrec(fracPrec).SetInt64(int64(base))
	for n := uint64(attempt); n > 0; n >>= 1 {
		if n&1 == 1 {
			p.Mul(p, x)
		}
		x.Mul(x, x)
	}
	if p.Cmp(new(big.Float).SetInt64(int64(limit))) >= 0 {
		return limit
	}
	d, _ := p.Int64() // truncates toward zero, like time.Duration(float)
	return time.Duration(d)
}

// uniform returns a value drawn uniformly from [0, n].
func (e Exponential) uniform(n uint64) uint64 {
	// n <= MaxInt64, so n+1 cannot overflow.
	if e.Rand != nil {
		return e.Rand.Uint64N(n + 1)
	}
	return rand.Uint64N(n + 1)
}
