package pgstore_test

import (
	"testing"
	"time"
)

// TestInformerShouldEqualAListAfterEightMixedWriters: 4 typed writers and
// 4 raw ones (explicit transactions around write(), a third of them held
// open up to 1 s, a quarter rolled back) on 40 keys for 2 s. The informer
// (another process) ends equal to a List, and per key its handler was given
// only committed values, in revision order. (Failed when the reader skipped
// holes instead of filling them: values of held-open transactions missing
// from the cache.)
func TestInformerShouldEqualAListAfterEightMixedWriters(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.start(4, 4, time.Second)
	time.Sleep(2 * time.Second)
	h.stopAndCheck(true)
	t.Logf("writes %d, conflicts %d, failures %d, informer stats %+v", h.writes.Load(), h.conflicts.Load(), h.failures.Load(), h.inf.Stats())
}
