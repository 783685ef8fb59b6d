package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any benchmark leaves a goroutine behind: every
// scenario shuts its queue down and waits for its workers and producers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
