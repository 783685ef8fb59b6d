//go:build linux

package chaos_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (the readers
// of the candidates' output end when the candidates do), and removes the
// candidate binary after the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withCleanup{m})
}

type withCleanup struct{ m *testing.M }

func (w withCleanup) Run() int {
	defer func() { _ = candidateBin.Remove() }()
	return w.m.Run()
}
