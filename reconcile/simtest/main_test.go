package simtest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every run is a synctest bubble, which ends only once its goroutines
// have; goleak checks what the kit's tests start outside them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The package example's test must pass, as any other.
func TestTheExampleShouldPass(t *testing.T) { testMirrorShouldSurviveCrashes(t) }
