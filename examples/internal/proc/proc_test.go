package proc

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartShouldReportHowAProcessEnded(t *testing.T) {
	r := NewRunner("self", "POD")
	defer r.Close()
	_, wait, err := r.Start("p", []string{"sh", "-c", "exit 3"}, nil)
	require.NoError(t, err)
	assert.Equal(t, Exit{Code: 3, Text: "exit status 3"}, wait())

	pid, wait, err := r.Start("p", []string{"sleep", "60"}, nil)
	require.NoError(t, err)
	Signal(pid, true)
	e := wait()
	assert.Equal(t, syscall.SIGKILL, e.Signal)
	assert.Equal(t, "signal: killed", e.Text)

	_, _, err = r.Start("p", []string{"no-such-command-anywhere"}, nil)
	assert.ErrorIs(t, err, ErrInvalidCommand)
	_, _, err = r.Start("p", nil, nil)
	assert.ErrorIs(t, err, ErrInvalidCommand)
}

func TestStartShouldNameThePodInTheEnvironment(t *testing.T) {
	r := NewRunner("self", "POD")
	defer r.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	_, wait, err := r.Start("default/web", []string{"sh", "-c", `printf "$POD"`}, f)
	require.NoError(t, err)
	require.Zero(t, wait().Code)
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Equal(t, "default/web", string(b))
}

func TestCrashBackOffShouldDoubleFromBaseToCapAndReset(t *testing.T) {
	b := CrashBackOff{Base: 10 * time.Second, Cap: 5 * time.Minute}
	crashes := 0
	var delays []time.Duration
	for range 8 {
		var d time.Duration
		crashes, d = b.AfterExit(crashes, time.Second)
		delays = append(delays, d)
	}
	assert.Equal(t, []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}, delays)
	n, d := b.AfterExit(crashes, 10*time.Minute)
	assert.Equal(t, 1, n, "a process that ran for twice the cap starts a fresh count")
	assert.Zero(t, d)
}
