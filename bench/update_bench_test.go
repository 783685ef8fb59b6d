package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/backoff"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/internal/testserver"
	"github.com/converge-go/converge/object"
)

// BenchmarkUpdate measures informer.Update against the loop a user would
// write by hand for the same status write-back: Get, shallow copy, mutate,
// reflect.DeepEqual, Update at the revision read, and on ErrConflict the
// same jittered backoff (updateBackoff, the helper's default) for at most the
// same attempts (informer.DefaultUpdateAttempts). The helper's overhead is
// what its generality costs: the option handling, the DeepCopy, Equal and
// object.Object lookups on V, mutate through a function value.
//
// Variants: memstore and etcdstore (the single-node test etcd; skipped
// unless its variable is set, see internal/testserver); 1 goroutine, or 8
// goroutines writing to 8 keys picked at random, which conflict and back
// off. ns/op is per write-back; conflicts/op counts the retries, and
// gaveup/op the write-backs that ran out of attempts. /equal: the value
// type has an Equal method, which the helper uses instead of DeepEqual (the
// hand-written loop calls it too).
//
//	go -C bench test -run xxx -bench BenchmarkUpdate -benchtime 2000x
func BenchmarkUpdate(b *testing.B) {
	for _, backend := range []string{"memstore", "etcdstore"} {
		for _, writers := range []int{1, 8} {
			for _, impl := range []string{"helper", "handwritten"} {
				name := impl + "/" + backend + "/" + strconv.Itoa(writers) + "writers"
				b.Run(name, func(b *testing.B) {
					runUpdateBench(b, newBenchStore(b, backend, newBenchValue), impl, writers, statusOf)
				})
			}
		}
	}
	for _, impl := range []string{"helper", "handwritten"} {
		b.Run(impl+"/memstore/1writers/equal", func(b *testing.B) {
			runUpdateBench(b, newBenchStore(b, "memstore", func() benchRSEqual { return benchRSEqual{newBenchValue()} }), impl, 1, statusOfEqual)
		})
	}
}

// benchRS is a ReplicaSet-like value: metadata, a spec with a map, a
// status with conditions; the write-back changes status.ready.
type benchRS struct {
	object.Meta
	Spec struct {
		Replicas int               `json:"replicas"`
		Image    string            `json:"image"`
		Labels   map[string]string `json:"labels"`
	} `json:"spec"`
	Status benchStatus `json:"status"`
}

type benchStatus struct {
	Ready      int                `json:"ready"`
	Conditions []object.Condition `json:"conditions"`
}

// benchRSEqual is benchRS with an Equal method that compares the fields a
// controller writes.
type benchRSEqual struct{ benchRS }

// Equal compares generation, finalizers, deletion and status.ready: what
// the write-backs change.
func (r benchRSEqual) Equal(o benchRSEqual) bool {
	return r.Generation == o.Generation && r.Status.Ready == o.Status.Ready &&
		r.DeletionRequested.Equal(o.DeletionRequested) && len(r.Finalizers) == len(o.Finalizers)
}

func statusOf(v *benchRS) *benchStatus           { return &v.Status }
func statusOfEqual(v *benchRSEqual) *benchStatus { return &v.Status }

func newBenchValue() benchRS {
	var v benchRS
	v.Generation = 3
	v.Finalizers = []string{"bench.converge.dev/cleanup"}
	v.Spec.Replicas = 3
	v.Spec.Image = "registry.example.com/app:v1.2.3"
	v.Spec.Labels = map[string]string{"app": "web", "tier": "frontend"}
	v.Status.Conditions = []object.Condition{{Type: "Available", Status: object.ConditionTrue, Reason: "MinimumReplicasAvailable",
		LastTransitionTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ObservedGeneration: 3}}
	return v
}

// newBenchStore returns a store of backend holding updateBenchKeys keys.
func newBenchStore[V any](b *testing.B, backend string, value func() V) informer.Store[string, V] {
	b.Helper()
	var s informer.Store[string, V]
	switch backend {
	case "memstore":
		s = must.Do(memstore.New[string, V]())
	case "etcdstore":
		if os.Getenv(testserver.EtcdEndpointsEnv) == "" && !testserver.Integration() {
			b.Skipf("SKIPPED: %s is not set, so there is no etcd to measure. Start the servers and run again: "+
				`scripts/servers.sh start; eval "$(scripts/servers.sh env)"; go -C bench test -run xxx -bench BenchmarkUpdate .; scripts/servers.sh stop`,
				testserver.EtcdEndpointsEnv)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: testserver.Etcd(b), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		s = must.Do(etcdstore.New[V](cli, "/converge-bench/update/"+strconv.FormatUint(rand.Uint64(), 36)+"/"))
	}
	for i := range updateBenchKeys {
		if _, err := s.Create(b.Context(), benchKey(i), value()); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

const updateBenchKeys = 8

var benchKeys = func() (keys [updateBenchKeys]string) {
	for i := range keys {
		keys[i] = "rs-" + strconv.Itoa(i)
	}
	return keys
}()

func benchKey(i int) string { return benchKeys[i%updateBenchKeys] }

// runUpdateBench runs b.N write-backs split over writers goroutines.
func runUpdateBench[V any](b *testing.B, s informer.Store[string, V], impl string, writers int, status func(*V) *benchStatus) {
	var conflicts, gaveUp atomic.Int64
	var seq atomic.Int64 // the value written: always new, so every write-back writes
	writeBack := func(ctx context.Context, key string) {
		ready := int(seq.Add(1))
		switch impl {
		case "helper":
			calls := 0
			_, _, err := informer.Update(ctx, s, key, func(v *V) error {
				calls++
				status(v).Ready = ready
				return nil
			})
			conflicts.Add(int64(calls - 1))
			if err != nil {
				gaveUp.Add(1)
			}
		case "handwritten":
			n, err := handwrittenUpdate(ctx, s, key, func(v *V) { status(v).Ready = ready })
			conflicts.Add(int64(n))
			if err != nil {
				gaveUp.Add(1)
			}
		}
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + writers - 1) / writers
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := w * per; i < min(b.N, (w+1)*per); i++ {
				key := benchKey(0)
				if writers > 1 {
					key = benchKey(r.IntN(updateBenchKeys))
				}
				writeBack(ctx, key)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
	b.ReportMetric(float64(gaveUp.Load())/float64(b.N), "gaveup/op")
}

// updateBackoff is informer.WithUpdateBackoff's default, copied: the
// hand-written loop waits as the helper does.
var updateBackoff = backoff.Exponential{
	Base:   10 * time.Millisecond,
	Cap:    200 * time.Millisecond,
	Jitter: backoff.FullJitter,
}

// handwrittenUpdate is the write-back without the helper, doing the same
// work: it returns how many conflicts it retried.
func handwrittenUpdate[V any](ctx context.Context, s informer.Store[string, V], key string, mutate func(*V)) (int, error) {
	bo := updateBackoff
	for attempt := 0; ; attempt++ {
		cur, rev, ok, err := s.Get(ctx, key)
		if err != nil {
			return attempt, err
		}
		if !ok {
			return attempt, informer.ErrNotFound
		}
		next := cur
		mutate(&next)
		if e, isEq := any(&next).(interface{ Equal(V) bool }); isEq {
			if e.Equal(cur) {
				return attempt, nil
			}
		} else if reflect.DeepEqual(cur, next) {
			return attempt, nil
		}
		_, err = s.Update(ctx, key, next, rev)
		if !errors.Is(err, informer.ErrConflict) {
			return attempt, err
		}
		if attempt+1 >= informer.DefaultUpdateAttempts {
			return attempt, err
		}
		t := time.NewTimer(bo.Delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, ctx.Err()
		case <-t.C:
		}
	}
}
