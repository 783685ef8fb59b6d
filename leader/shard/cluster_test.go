package shard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/leader/shard"
	"github.com/converge-go/converge/leader/shard/shardtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run inside a synctest bubble only to know when the replicas'
// goroutines are idle; all time comes from the fake clock, stepped by the
// test in ticks, as in the leader package's tests.
const (
	lease   = 15 * time.Second
	renew   = 10 * time.Second
	retry   = 2 * time.Second
	tick    = 100 * time.Millisecond
	buckets = 16
)

// act is one replica's time acting on one bucket: from ServeBucket's start
// until it returned or its lease ended, whichever came first.
type act struct {
	replica    string
	b          shard.Bucket
	start, end time.Time
	open       bool
	overlapped bool // another replica acquired while this one was paused
}

type cluster struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	locks *memlock.Locks
	// drain is how long a handler keeps working on a bucket after its
	// stop, as in-flight reconciles would.
	drain time.Duration

	mu   sync.Mutex
	acts []*act
	// replicas are every replica started, whose clocks step with the
	// cluster's unless paused.
	replicas []*replica
	// fence is the highest epoch written per bucket (see fencedWrite).
	fence map[int]leader.Term
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), locks: memlock.NewLocks(), fence: map[int]leader.Term{}}
}

// begin records that replica started acting on b, and fails the test if
// any other act on b's bucket is still open: two holders at once.
func (cl *cluster) begin(replica string, b shard.Bucket) *act {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, a := range cl.acts {
		if a.b.ID == b.ID {
			if a.open && cl.isPaused(a.replica) {
				// A paused process does nothing; what protects the
				// bucket from its resumption is the fence (and its
				// watchdog, the moment it runs again).
				a.overlapped = true
			} else if a.open {
				cl.t.Errorf("bucket %d: %s acts in epoch %d while %s still acts in epoch %d", b.ID, replica, b.Epoch, a.replica, a.b.Epoch)
			}
			if a.b.Epoch >= b.Epoch {
				cl.t.Errorf("bucket %d: epoch %d of %s does not follow epoch %d of %s", b.ID, b.Epoch, replica, a.b.Epoch, a.replica)
			}
		}
	}
	a := &act{replica: replica, b: b, start: cl.clk.Now(), open: true}
	cl.acts = append(cl.acts, a)
	cl.fencedWriteLocked(b)
	return a
}

// fencedWrite is a write conditional on the bucket's epoch, as a
// reconciler makes it against its store: refused if a later epoch of the
// bucket has written. Every holder writes once when it starts.
func (cl *cluster) fencedWrite(b shard.Bucket) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.fencedWriteLocked(b)
}

func (cl *cluster) fencedWriteLocked(b shard.Bucket) bool {
	if b.Epoch < cl.fence[b.ID] {
		return false
	}
	cl.fence[b.ID] = b.Epoch
	return true
}

func (cl *cluster) isPaused(id string) bool {
	for _, r := range cl.replicas {
		if r.id == id {
			return r.paused.Load()
		}
	}
	return false
}

// step moves the cluster's clock and every running replica's by d.
func (cl *cluster) step(d time.Duration) {
	for _, r := range cl.replicas {
		if !r.paused.Load() {
			r.clk.Step(d)
		}
	}
	cl.clk.Step(d)
}

// pause freezes r's clock: every goroutine of r waits on it, so r does
// nothing, as a SIGSTOPped process. resume moves its clock on by the time
// it missed at once, as the real clock of a resumed process does.
func (cl *cluster) pause(r *replica) { r.paused.Store(true) }

func (cl *cluster) resume(r *replica) {
	r.paused.Store(false)
	r.clk.SetTime(cl.clk.Now())
}

func (cl *cluster) end(a *act) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if a.open {
		a.open, a.end = false, cl.clk.Now()
	}
}

// holders maps each bucket with an open act to its actor.
func (cl *cluster) holders() map[int]string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := map[int]string{}
	for _, a := range cl.acts {
		if a.open {
			out[a.b.ID] = a.replica
		}
	}
	return out
}

func (cl *cluster) actsOf(replica string) []act {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []act
	for _, a := range cl.acts {
		if a.replica == replica {
			out = append(out, *a)
		}
	}
	return out
}

type replica struct {
	id      string
	s       *shard.Sharder
	backend *shardtest.Cuttable
	cancel  context.CancelFunc
	done    chan struct{}
	clk     *clocktesting.FakeClock // the replica's own clock
	paused  atomic.Bool
}

func (cl *cluster) start(id string) *replica {
	r := &replica{id: id, backend: &shardtest.Cuttable{Backend: cl.locks}, done: make(chan struct{}), clk: clocktesting.NewFakeClock(cl.clk.Now())}
	cl.replicas = append(cl.replicas, r)
	s, err := shard.New(r.backend, shard.Config{
		Name: "test", Identity: id, Buckets: buckets,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, JitterFactor: 1, Clock: r.clk,
	})
	require.NoError(cl.t, err)
	require.NoError(cl.t, s.Add(shard.HandlerFunc(func(stop, lease context.Context, b shard.Bucket) {
		got, ok := shard.FromContext(stop)
		assert.True(cl.t, ok && got == b, "stop carries the bucket")
		a := cl.begin(id, b)
		defer cl.end(a)
		unhook := context.AfterFunc(lease, func() { cl.end(a) })
		defer unhook()
		<-stop.Done()
		if cl.drain > 0 && lease.Err() == nil {
			select {
			case <-r.clk.After(cl.drain):
			case <-lease.Done():
			}
		}
	})))
	r.s = s
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		assert.NoError(cl.t, s.Run(ctx))
	}()
	synctest.Wait()
	return r
}

// stop ends the replica's Run and steps the clock until it has returned.
func (cl *cluster) stop(r *replica) {
	r.cancel()
	for {
		synctest.Wait()
		select {
		case <-r.done:
			return
		default:
		}
		cl.step(tick)
	}
}

// until steps the clock until cond holds and returns the time it took,
// failing after limit.
func (cl *cluster) until(limit time.Duration, cond func() bool) time.Duration {
	cl.t.Helper()
	elapsed := time.Duration(0)
	for ; !cond(); elapsed += tick {
		require.Less(cl.t, elapsed, limit, "condition not reached in time")
		cl.step(tick)
		synctest.Wait()
	}
	return elapsed
}

func (cl *cluster) advance(d time.Duration) {
	for elapsed := time.Duration(0); elapsed < d; elapsed += tick {
		cl.step(tick)
		synctest.Wait()
	}
}

// balanced reports whether every bucket is held, by its owner by Assign
// over exactly the given replicas.
func (cl *cluster) balanced(rs ...*replica) bool {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.id
	}
	want := shard.Assign(ids, buckets)
	got := cl.holders()
	for b := range buckets {
		if got[b] != want[b] {
			return false
		}
	}
	return true
}
