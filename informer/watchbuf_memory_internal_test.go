package informer

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"unsafe"

	"github.com/converge-go/converge/internal/must"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleSource lists nothing and watches without emitting; watching receives
// a token once its Watch has begun.
type idleSource struct{ watching chan struct{} }

func (s idleSource) List(context.Context) ([]Entry[string, int], Revision, error) { return nil, 0, nil }

func (s idleSource) Watch(ctx context.Context, _ Revision, _ func(Event[string, int]) error) error {
	s.watching <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

// The watch buffer is bounded at two times watchBuffer changes, but an
// informer whose source sends nothing must not hold that room: a program
// with many small informers would pay for every one.
func TestAnIdleWatchingInformerShouldNotHoldItsWatchBuffersRoom(t *testing.T) {
	const informers = 100
	src := idleSource{watching: make(chan struct{}, informers)}
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, informers)
	before := liveHeap()
	infs := make([]*Informer[string, int], informers)
	for i := range infs {
		infs[i] = must.Do(New[string, int]("idle", src, WithLogger(logger)))
		go func() { done <- infs[i].Run(ctx) }()
	}
	for range informers {
		<-src.watching
	}
	perInformer := (liveHeap() - before) / informers
	runtime.KeepAlive(infs)
	cancel()
	for range informers {
		require.NoError(t, <-done)
	}

	full := int64(2 * watchBuffer * unsafe.Sizeof(Event[string, int]{}))
	t.Logf("an idle watching informer holds %d bytes; a full watch buffer and its spare would be %d", perInformer, full)
	assert.Less(t, perInformer, full/16, "bytes held by an idle watching informer")
}
