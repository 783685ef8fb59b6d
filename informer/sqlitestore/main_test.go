package sqlitestore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a writer child when a test re-executes
// it with childEnv set (see child_test.go), else the tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
