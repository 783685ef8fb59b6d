package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// asMainEnv makes the test binary run the program instead of the tests, so
// that the tests can start agents, and the agents their workers, from the
// binary go test built.
const asMainEnv = "CLUSTER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
