package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// asMainEnv makes the test binary run the program instead of the tests,
// so that the tests can run the demo, and the demo its workers, from the
// binary go test built, without building another.
const asMainEnv = "REPLICASET_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
