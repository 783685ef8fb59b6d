package informer

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/converge-go/converge/internal/must"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// burstSource lists nothing at revision 0, then its Watch emits a Put of
// key k<i> with value i at revision i+1 for i < n, back to back, counting
// the emits that returned, and waits for ctx.
type burstSource struct {
	n       int
	emitted atomic.Int64
}

func (s *burstSource) List(context.Context) ([]Entry[string, int], Revision, error) {
	return nil, 0, nil
}

func (s *burstSource) Watch(ctx context.Context, _ Revision, emit func(Event[string, int]) error) error {
	for i := range s.n {
		if err := emit(Event[string, int]{Type: Put, Key: fmt.Sprintf("k%d", i), Value: i, Revision: Revision(i + 1)}); err != nil {
			return err
		}
		s.emitted.Add(1)
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestAPlainWatchShouldKeepEmittingWhileTheInformerAppliesAndBeHeldUpOnlyByAFullBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		src := &burstSource{n: 4 * watchBuffer}
		inf := must.Do(New[string, int]("t", src, WithLogger(slog.New(slog.DiscardHandler)), WithTransform(func(v int) int {
			if v == 0 {
				<-release // the applier is held up at the first change
			}
			return v
		})))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- inf.Run(ctx) }()
		synctest.Wait()

		// The applier holds at most one buffer's worth and the buffer
		// another: the source is held up then, not before.
		n := src.emitted.Load()
		assert.GreaterOrEqual(t, n, int64(watchBuffer), "the watch emitted while the first change was being applied")
		assert.LessOrEqual(t, n, int64(2*watchBuffer), "the buffer is bounded: a slow apply slows the source")

		close(release)
		require.NoError(t, inf.WaitForRevision(ctx, Revision(src.n)))
		assert.Equal(t, src.n, inf.Len())
		assert.Equal(t, uint64(src.n), inf.Stats().Events)
		cancel()
		require.NoError(t, <-done)
	})
}
