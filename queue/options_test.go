package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/queue"
)

func TestNewShouldRefuseANilOptionOrANilValueNamingTheOption(t *testing.T) {
	defer goleak.VerifyNone(t)
	var (
		unset      queue.Option
		nilClock   *clocktesting.FakeClock
		nilLimiter *backoff.PerKey[string]
	)
	for _, tc := range []struct {
		name string
		opt  queue.Option
		want string
	}{
		{"nil option", nil, "queue.New: option 1 is nil"},
		{"unset option variable", unset, "queue.New: option 1 is nil"},
		{"nil clock", queue.WithClock(nil), "queue.New: WithClock(nil): omit the option for the real clock"},
		{"nil clock pointer", queue.WithClock(nilClock),
			"queue.New: WithClock((*testing.FakeClock)(nil)): omit the option for the real clock"},
		{"nil rate limiter", queue.WithRateLimiter[string](nil),
			"queue.New: WithRateLimiter(nil): omit the option for backoff.DefaultController"},
		{"nil rate limiter pointer", queue.WithRateLimiter[string](nilLimiter),
			"queue.New: WithRateLimiter((*backoff.PerKey[string])(nil)): omit the option for backoff.DefaultController"},
		{"nil group function", queue.WithGroup[string](nil), "queue.New: WithGroup(nil): omit the option for no groups"},
		{"nil metrics", queue.WithMetrics(nil), "queue.New: WithMetrics(nil): omit the option for no metrics"},
		{"metrics not made by NewMetrics", queue.WithMetrics(&queue.Metrics{}),
			"queue.New: WithMetrics: the Metrics was not made by NewMetrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := queue.New[string](queue.WithAgeing(time.Second), tc.opt)
			assert.EqualError(t, err, tc.want)
			assert.Nil(t, q)
		})
	}
}

func TestNewShouldReportEveryBadOptionValueAtOnce(t *testing.T) {
	_, err := queue.New[string](queue.WithClock(nil), queue.WithGroup[string](nil))
	require.Error(t, err)
	assert.Equal(t, "queue.New: WithClock(nil): omit the option for the real clock\n"+
		"WithGroup(nil): omit the option for no groups", err.Error())
}
