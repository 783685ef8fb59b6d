package reconcile_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/reconcile"
)

func TestKeyStatusShouldPrintAsOneLineThatSaysWhatHappensNext(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		st   reconcile.KeyStatus
		want string
	}{
		{"no failure", reconcile.KeyStatus{}, "no failures"},
		{"one failure, retry due", reconcile.KeyStatus{Attempts: 1, LastError: refused, NextRetry: at},
			"1 failed attempt, last error: connection refused; retry at 2026-01-02T03:04:05.600Z"},
		{"failures, retry not yet scheduled", reconcile.KeyStatus{Attempts: 3, LastError: refused},
			"3 failed attempts, last error: connection refused"},
		{"parked", reconcile.KeyStatus{Attempts: 5, LastError: refused, Parked: true},
			"parked after 5 failed attempts, last error: connection refused; not retried until the key changes or is unparked"},
		{"terminal", reconcile.KeyStatus{Attempts: 2, LastError: errors.New("bad spec"), Terminal: true},
			"terminal error after 2 failed attempts: bad spec; not retried until the key changes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, fmt.Sprint(tc.st))
		})
	}
}
