package reconcile

import (
	"context"
	"fmt"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// BenchmarkWaitForHead is the head barrier's own cost at a Run's start,
// over synced memory-store informers that hold the store's head (the
// usual case: nothing written since they listed): one head read and one
// revision check per informer, for 1 and for 3 watched informers.
//
//	go test -run xxx -bench BenchmarkWaitForHead -count 5 ./reconcile/
func BenchmarkWaitForHead(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("informers=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var opts []Option
			var done []chan error
			for i := range n {
				store := must.Do(memstore.New[string, int]())
				for k := range 1000 {
					store.Put(fmt.Sprint(k), k)
				}
				inf := must.Do(informer.New[string, int](fmt.Sprint("ints-", i), store))
				ch := make(chan error, 1)
				go func() { ch <- inf.Run(ctx) }()
				done = append(done, ch)
				if err := inf.WaitForSync(ctx); err != nil {
					b.Fatal(err)
				}
				opts = append(opts, For(inf))
			}
			c, err := New("c", Func(func(context.Context, string) (Result, error) { return Result{}, nil }),
				append(opts, WithHeadBarrier())...)
			if err != nil {
				b.Fatal(err)
			}
			r := newRun(ctx, c)
			b.ResetTimer()
			for range b.N {
				r.waitForHead(ctx)
			}
			b.StopTimer()
			cancel()
			for _, ch := range done {
				<-ch
			}
		})
	}
}
