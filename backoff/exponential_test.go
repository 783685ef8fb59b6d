package backoff_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/backoff"
)

func TestExponentialZeroValueShouldUseClientGoDefaults(t *testing.T) {
	var e backoff.Exponential

	require.NoError(t, e.Validate())
	assert.Equal(t, 5*time.Millisecond, e.Delay(0))
	assert.Equal(t, 10*time.Millisecond, e.Delay(1))
	assert.Equal(t, 20*time.Millisecond, e.Delay(2))
	assert.Equal(t, 1000*time.Second, e.Delay(100))
	assert.Equal(t, backoff.NoJitter, e.Jitter)
}

func TestExponentialDelayShouldFollowBaseTimesFactorPowerUntilCap(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		e    backoff.Exponential
		want []time.Duration // for attempts 0, 1, 2, ...
	}{
		{"doubling", backoff.Exponential{Base: ms, Cap: time.Second}, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms}},
		{"doubling to cap", backoff.Exponential{Base: ms, Cap: 10 * ms}, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms}},
		{"tripling", backoff.Exponential{Base: ms, Cap: time.Second, Factor: 3}, []time.Duration{ms, 3 * ms, 9 * ms, 27 * ms, 81 * ms}},
		{"one and a half", backoff.Exponential{Base: 8 * ms, Cap: time.Second, Factor: 1.5}, []time.Duration{8 * ms, 12 * ms, 18 * ms, 27 * ms, 40500 * time.Microsecond}},
		{"fraction truncated to nanoseconds", backoff.Exponential{Base: 1, Cap: time.Second, Factor: 1.5}, []time.Duration{1, 1, 2, 3, 5, 7}},
		{"factor one is constant", backoff.Exponential{Base: 7 * ms, Factor: 1}, []time.Duration{7 * ms, 7 * ms, 7 * ms}},
		{"base equal to cap", backoff.Exponential{Base: time.Second, Cap: time.Second}, []time.Duration{time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for attempt, want := range tt.want {
				assert.Equal(t, want, tt.e.Delay(attempt), "attempt %d", attempt)
			}
		})
	}
}

func TestExponentialDelayShouldTreatNegativeAttemptAsZero(t *testing.T) {
	e := backoff.Exponential{Base: time.Second, Cap: time.Hour}
	for _, attempt := range []int{-1, -100, math.MinInt} {
		assert.Equal(t, time.Second, e.Delay(attempt), "attempt %d", attempt)
	}
}

func TestExponentialDelayShouldSaturateAtCapInsteadOfOverflowing(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	tests := []struct {
		name    string
		e       backoff.Exponential
		attempt int
	}{
		{"huge attempt", backoff.Exponential{Base: time.Millisecond, Cap: time.Hour}, 1 << 40},
		{"max attempt", backoff.Exponential{Base: time.Millisecond, Cap: time.Hour}, math.MaxInt},
		{"max attempt, max cap", backoff.Exponential{Base: 1, Cap: maxD}, math.MaxInt},
		{"huge integer factor", backoff.Exponential{Base: time.Millisecond, Cap: time.Hour, Factor: 1e9}, 1 << 40},
		{"factor beyond int64", backoff.Exponential{Base: time.Millisecond, Cap: maxD, Factor: 1e300}, 2},
		{"largest float factor", backoff.Exponential{Base: 1, Cap: maxD, Factor: math.MaxFloat64}, 1},
		{"huge fractional factor", backoff.Exponential{Base: 1, Cap: maxD, Factor: 1e300 + 0.5e284}, 3},
		{"base near max", backoff.Exponential{Base: maxD - 1, Cap: maxD}, 1},
		{"base near max, huge factor", backoff.Exponential{Base: maxD - 1, Cap: maxD, Factor: 1e9}, 1 << 40},
		{"base near max, fractional factor", backoff.Exponential{Base: maxD - 1, Cap: maxD, Factor: 1.5}, 1},
		{"factor barely above one", backoff.Exponential{Base: time.Second, Cap: time.Hour, Factor: 1 + 1e-15}, math.MaxInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.e.Delay(tt.attempt)
			assert.Equal(t, tt.e.Cap, got)
			for _, j := range []backoff.Jitter{backoff.FullJitter, backoff.EqualJitter} {
				e := tt.e
				e.Jitter = j
				got := e.Delay(tt.attempt)
				assert.GreaterOrEqual(t, got, time.Duration(0), "%v", j)
				assert.LessOrEqual(t, got, tt.e.Cap, "%v", j)
			}
		})
	}
}

func TestExponentialDelayShouldNeverDecreaseForFactorsBarelyAboveOne(t *testing.T) {
	// float64 math.Pow wobbles here: its error grows with the exponent
	// and exceeds the step between neighbouring attempts.
	for _, factor := range []float64{1 + 0x1p-52, 1 + 0x1p-40, 1 + 1e-9, 1.0001} {
		e := backoff.Exponential{Base: time.Duration(math.MaxInt64 / 4), Cap: time.Duration(math.MaxInt64), Factor: factor}
		steps := math.Log(4) / math.Log(factor) // attempts until the cap
		for _, frac := range []float64{0.1, 0.37, 0.5, 0.77, 0.999} {
			n := int(frac * steps)
			prev := e.Delay(n)
			for attempt := n + 1; attempt < n+50; attempt++ {
				d := e.Delay(attempt)
				require.GreaterOrEqual(t, d, prev, "factor %v attempt %d", factor, attempt)
				prev = d
			}
		}
	}
}

func TestExponentialDelayShouldRepairInvalidSettings(t *testing.T) {
	tests := []struct {
		name string
		e    backoff.Exponential
		want []time.Duration
	}{
		{"negative base uses default", backoff.Exponential{Base: -time.Second, Cap: time.Second}, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond}},
		{"negative cap uses default", backoff.Exponential{Base: 600 * time.Second, Cap: -1}, []time.Duration{600 * time.Second, 1000 * time.Second}},
		{"factor below one uses default", backoff.Exponential{Base: time.Second, Cap: time.Hour, Factor: 0.5}, []time.Duration{time.Second, 2 * time.Second}},
		{"negative factor uses default", backoff.Exponential{Base: time.Second, Cap: time.Hour, Factor: -3}, []time.Duration{time.Second, 2 * time.Second}},
		{"NaN factor uses default", backoff.Exponential{Base: time.Second, Cap: time.Hour, Factor: math.NaN()}, []time.Duration{time.Second, 2 * time.Second}},
		{"infinite factor uses default", backoff.Exponential{Base: time.Second, Cap: time.Hour, Factor: math.Inf(1)}, []time.Duration{time.Second, 2 * time.Second}},
		{"base above cap is lowered to cap", backoff.Exponential{Base: time.Hour, Cap: time.Minute}, []time.Duration{time.Minute, time.Minute}},
		{"base above default cap is lowered to it", backoff.Exponential{Base: time.Hour}, []time.Duration{1000 * time.Second, 1000 * time.Second}},
		{"unknown jitter means none", backoff.Exponential{Base: time.Second, Cap: time.Hour, Jitter: 42}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, tt.e.Validate())
			for attempt, want := range tt.want {
				assert.Equal(t, want, tt.e.Delay(attempt), "attempt %d", attempt)
			}
		})
	}
}

func TestExponentialValidateShouldNameEachInvalidSetting(t *testing.T) {
	tests := []struct {
		name string
		e    backoff.Exponential
		want []string // substrings; none means valid
	}{
		{"zero value", backoff.Exponential{}, nil},
		{"explicit defaults", backoff.Exponential{Base: 5 * time.Millisecond, Cap: 1000 * time.Second, Factor: 2}, nil},
		{"factor one", backoff.Exponential{Factor: 1}, nil},
		{"base equal to cap", backoff.Exponential{Base: time.Second, Cap: time.Second}, nil},
		{"full jitter", backoff.Exponential{Jitter: backoff.FullJitter}, nil},
		{"negative base", backoff.Exponential{Base: -1}, []string{"Base -1ns is negative"}},
		{"negative cap", backoff.Exponential{Cap: -time.Second}, []string{"Cap -1s is negative"}},
		{"factor below one", backoff.Exponential{Factor: 0.5}, []string{"Factor 0.5 is below 1"}},
		{"NaN factor", backoff.Exponential{Factor: math.NaN()}, []string{"Factor NaN is not a finite number"}},
		{"infinite factor", backoff.Exponential{Factor: math.Inf(1)}, []string{"Factor +Inf is not a finite number"}},
		{"base above cap", backoff.Exponential{Base: time.Hour, Cap: time.Minute}, []string{"Base 1h0m0s is above the cap 1m0s"}},
		{"base above default cap", backoff.Exponential{Base: time.Hour}, []string{"Base 1h0m0s is above the cap 16m40s"}},
		{"unknown jitter", backoff.Exponential{Jitter: 7}, []string{"unknown Jitter(7)"}},
		{"several at once", backoff.Exponential{Base: -1, Factor: 0.1, Jitter: -1}, []string{"Base -1ns", "Factor 0.1", "Jitter(-1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if len(tt.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, s := range tt.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestJitterShouldStayWithinItsBoundsOverManySeededDraws(t *testing.T) {
	const d = 1000 * time.Millisecond
	tests := []struct {
		jitter backoff.Jitter
		lo, hi time.Duration
	}{
		{backoff.FullJitter, 0, d},
		{backoff.EqualJitter, d / 2, d},
	}
	for _, tt := range tests {
		t.Run(tt.jitter.String(), func(t *testing.T) {
			e := backoff.Exponential{Base: d, Cap: d, Jitter: tt.jitter, Rand: rand.New(rand.NewPCG(1, 2))}
			var below, above int // either side of the middle of the range
			mid := tt.lo + (tt.hi-tt.lo)/2
			for range 10000 {
				got := e.Delay(0)
				require.GreaterOrEqual(t, got, tt.lo)
				require.LessOrEqual(t, got, tt.hi)
				if got < mid {
					below++
				} else {
					above++
				}
			}
			// Uniform: each half gets about 5000; far off means a skewed draw.
			assert.InDelta(t, 5000, below, 300)
			assert.InDelta(t, 5000, above, 300)
		})
	}
}

func TestJitterShouldStayWithinBoundsForTinyAndHugeDelays(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 3, time.Duration(math.MaxInt64)} {
		for _, j := range []backoff.Jitter{backoff.FullJitter, backoff.EqualJitter} {
			// Rand nil: the global source is used, and must obey the same bounds.
			e := backoff.Exponential{Base: d, Cap: d, Jitter: j}
			for range 100 {
				got := e.Delay(0)
				require.GreaterOrEqual(t, got, time.Duration(0), "%v %v", j, d)
				require.LessOrEqual(t, got, d, "%v %v", j, d)
				if j == backoff.EqualJitter {
					require.GreaterOrEqual(t, got, d/2, "%v %v", j, d)
				}
			}
		}
	}
}

func TestJitterShouldReproduceTheSameSequenceForAFixedSeed(t *testing.T) {
	draw := func(seed uint64, j backoff.Jitter) []time.Duration {
		e := backoff.Exponential{Base: time.Millisecond, Cap: time.Minute, Jitter: j, Rand: rand.New(rand.NewPCG(seed, seed))}
		var out []time.Duration
		for attempt := range 20 {
			out = append(out, e.Delay(attempt))
		}
		return out
	}
	for _, j := range []backoff.Jitter{backoff.FullJitter, backoff.EqualJitter} {
		assert.Equal(t, draw(7, j), draw(7, j), "%v", j)
		assert.NotEqual(t, draw(7, j), draw(8, j), "%v", j)
	}
}

func TestJitterStringShouldNameTheConstant(t *testing.T) {
	tests := map[backoff.Jitter]string{
		backoff.NoJitter:    "NoJitter",
		backoff.FullJitter:  "FullJitter",
		backoff.EqualJitter: "EqualJitter",
		backoff.Jitter(9):   "Jitter(9)",
		backoff.Jitter(-1):  "Jitter(-1)",
	}
	for j, want := range tests {
		assert.Equal(t, want, j.String())
	}
}

func FuzzExponentialDelay(f *testing.F) {
	f.Add(int64(0), int64(0), 0.0, 0, 0)
	f.Add(int64(time.Millisecond), int64(time.Second), 2.0, 5, 0)
	f.Add(int64(time.Millisecond), int64(time.Hour), 1.5, 30, 1)
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64), 1e9, 1<<40, 2)
	f.Add(int64(1), int64(math.MaxInt64), 1+0x1p-52, 1<<50, 0)
	f.Add(int64(-5), int64(-5), -1.0, -1, 3)
	f.Fuzz(func(t *testing.T, base, limit int64, factor float64, attempt, jitter int) {
		e := backoff.Exponential{
			Base:   time.Duration(base),
			Cap:    time.Duration(limit),
			Factor: factor,
			Jitter: backoff.Jitter(jitter % 4), // includes one unknown value
			Rand:   rand.New(rand.NewPCG(uint64(base), uint64(attempt))),
		}
		effectiveCap := e.Cap
		if effectiveCap <= 0 {
			effectiveCap = backoff.DefaultCap
		}
		d := e.Delay(attempt)
		if d < 0 || d > effectiveCap {
			t.Fatalf("Delay(%d) = %v, want in [0, %v] for %+v", attempt, d, effectiveCap, e)
		}
		if e.Jitter != backoff.NoJitter || attempt == math.MaxInt {
			return
		}
		if next := e.Delay(attempt + 1); next < d {
			t.Fatalf("Delay(%d) = %v < Delay(%d) = %v for %+v", attempt+1, next, attempt, d, e)
		}
	})
}

func BenchmarkExponentialDelay(b *testing.B) {
	for _, factor := range []float64{2, 1.5} {
		e := backoff.Exponential{Factor: factor}
		b.Run(fmt.Sprint("factor=", factor), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				e.Delay(i % 64)
			}
		})
	}
}
