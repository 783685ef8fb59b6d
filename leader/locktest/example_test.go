package locktest_test

import (
	"testing"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/locktest"
	"github.com/converge-go/converge/leader/memlock"
)

// A leader.Lock implementation's tests run both suites. Run gets a fresh,
// empty lock per subtest; Handover gets two locks over one record, each
// through a connection of its own, as two processes would have. These are
// memlock's tests; a lock over a server opens a client per call and names
// its record uniquely per test.
func Example() {
	testContract := func(t *testing.T) { // func TestLockShouldSatisfyTheLockContract(t *testing.T)
		locktest.Run(t, func(*testing.T) leader.Lock { return memlock.NewLock() })
	}
	testHandover := func(t *testing.T) { // func TestHandoverShouldPassOnTheMemoryLock(t *testing.T)
		shared := memlock.NewLock() // in memory, "one record" is one *Lock
		locktest.Handover(t, func(*testing.T) leader.Lock { return shared })
	}
	_, _ = testContract, testHandover
}
