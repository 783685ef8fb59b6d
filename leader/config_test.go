package leader_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
)

func TestNewShouldRejectInvalidTimingsWithAClearError(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  leader.Config
		want string // "" means valid
	}{
		{"defaults", leader.Config{Identity: "a"}, ""},
		{"explicit client-go timings", leader.Config{Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, ""},
		{"no jitter", leader.Config{Identity: "a", JitterFactor: 1, RenewDeadline: 3 * time.Second, RetryPeriod: 2 * time.Second}, ""},
		{"empty identity", leader.Config{}, "Identity must not be empty"},
		{"negative lease", leader.Config{Identity: "a", LeaseDuration: -time.Second}, "LeaseDuration -1s must be positive"},
		{"negative renew deadline", leader.Config{Identity: "a", RenewDeadline: -time.Second}, "RenewDeadline -1s must be positive"},
		{"negative retry period", leader.Config{Identity: "a", RetryPeriod: -time.Second}, "RetryPeriod -1s must be positive"},
		{"jitter below one", leader.Config{Identity: "a", JitterFactor: 0.5}, "JitterFactor 0.5 must be at least 1"},
		{"jitter NaN", leader.Config{Identity: "a", JitterFactor: math.NaN()}, "JitterFactor NaN must be a finite number, at least 1"},
		{"jitter +Inf", leader.Config{Identity: "a", JitterFactor: math.Inf(1)}, "JitterFactor +Inf must be a finite number, at least 1"},
		{"jitter -Inf", leader.Config{Identity: "a", JitterFactor: math.Inf(-1)}, "JitterFactor -Inf must be a finite number, at least 1"},
		{"renew deadline equal to lease", leader.Config{Identity: "a", LeaseDuration: 10 * time.Second}, "RenewDeadline 10s (the default) must be shorter than LeaseDuration 10s"},
		{"default renew deadline above a short lease", leader.Config{Identity: "a", LeaseDuration: time.Second}, "RenewDeadline 10s (the default) must be shorter than LeaseDuration 1s"},
		{"renew deadline longer than lease", leader.Config{Identity: "a", RenewDeadline: 20 * time.Second}, "RenewDeadline 20s must be shorter than LeaseDuration 15s (the default)"},
		{"both set", leader.Config{Identity: "a", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}, "RenewDeadline 2s must be shorter than LeaseDuration 1s"},
		{"renew deadline within jittered retry", leader.Config{Identity: "a", RetryPeriod: 9 * time.Second}, "RenewDeadline 10s (the default) must be longer than JitterFactor 1.2 (the default) × RetryPeriod 9s"},
		{"all set", leader.Config{Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 2 * time.Second, JitterFactor: 1.5},
			"RenewDeadline 3s must be longer than JitterFactor 1.5 × RetryPeriod 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := leader.New(memlock.NewLock(), tc.cfg)
			if tc.want == "" {
				require.NoError(t, err)
				assert.NotNil(t, e)
				return
			}
			require.ErrorIs(t, err, leader.ErrInvalidConfig)
			assert.Equal(t, "leader: invalid config: "+tc.want, err.Error())
		})
	}
}

func TestNewShouldRejectANilLock(t *testing.T) {
	_, err := leader.New(nil, leader.Config{Identity: "a"})
	assert.ErrorIs(t, err, leader.ErrInvalidConfig)
}
