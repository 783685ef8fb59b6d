package listdecode_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/listdecode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// atoi decodes a decimal value; a value it cannot decode comes back with
// a partial value, as some codecs do.
func atoi(_ string, _ informer.Revision, data []byte) (int, error) {
	n, err := strconv.Atoi(string(data))
	if err != nil {
		return -1, err
	}
	return n, nil
}

func addAll(d *listdecode.Decoder[int], n int, bad func(i int) bool) {
	for i := range n {
		data := []byte(strconv.Itoa(i))
		if bad(i) {
			data = []byte("bad")
		}
		d.Add("k"+strconv.Itoa(i), informer.Revision(i+1), data)
	}
}

func TestFinishShouldReturnEveryEntryInTheOrderAddWasGivenThem(t *testing.T) {
	for _, n := range []int{0, 1, listdecode.Chunk - 1, listdecode.Chunk, listdecode.Chunk + 1, 20*listdecode.Chunk + 7} {
		d := listdecode.New(context.Background(), atoi)
		addAll(d, n, func(int) bool { return false })
		entries, bad, err := d.Finish()
		require.NoError(t, err, "n=%d", n)
		assert.Zero(t, bad, "n=%d", n)
		require.Len(t, entries, n)
		for i, e := range entries {
			if e.Key != "k"+strconv.Itoa(i) || e.Revision != informer.Revision(i+1) || e.Value != i || e.Err != nil {
				t.Fatalf("n=%d: entry %d is %+v", n, i, e)
			}
		}
	}
}

func TestFinishShouldReportAValueThatDoesNotDecodeAsItsEntrysErrWithTheZeroValue(t *testing.T) {
	const n = 10*listdecode.Chunk + 3
	isBad := func(i int) bool { return i%97 == 0 }
	d := listdecode.New(context.Background(), atoi)
	addAll(d, n, isBad)
	entries, bad, err := d.Finish()
	require.NoError(t, err, "a bad value fails its entry, not the list")
	require.Len(t, entries, n)
	want := 0
	for i, e := range entries {
		assert.Equal(t, "k"+strconv.Itoa(i), e.Key)
		if isBad(i) {
			want++
			assert.Error(t, e.Err, "entry %d", i)
			assert.Zero(t, e.Value, "entry %d: not the codec's partial value", i)
		} else {
			assert.NoError(t, e.Err, "entry %d", i)
			assert.Equal(t, i, e.Value)
		}
	}
	assert.Equal(t, want, bad)
}

func TestAListSmallerThanAChunkShouldDecodeOnTheCallersGoroutineInFinish(t *testing.T) {
	var inFinish, elsewhere atomic.Int64
	decode := func(key string, rev informer.Revision, data []byte) (int, error) {
		if onStack("listdecode.(*Decoder[...]).Finish") {
			inFinish.Add(1)
		} else {
			elsewhere.Add(1)
		}
		return atoi(key, rev, data)
	}
	d := listdecode.New(context.Background(), decode)
	addAll(d, listdecode.Chunk-1, func(int) bool { return false })
	assert.Zero(t, inFinish.Load()+elsewhere.Load(), "nothing decodes before Finish")
	_, _, err := d.Finish()
	require.NoError(t, err)
	assert.EqualValues(t, listdecode.Chunk-1, inFinish.Load())
	assert.Zero(t, elsewhere.Load())
}

// onStack reports whether a function whose name ends in fn is on the
// calling goroutine's stack.
func onStack(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

func TestFinishShouldReturnTheContextsErrorAndStopDecodingWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	decode := func(key string, rev informer.Revision, data []byte) (int, error) {
		calls.Add(1)
		return atoi(key, rev, data)
	}
	d := listdecode.New(ctx, decode)
	addAll(d, 3*listdecode.Chunk, func(int) bool { return false })
	cancel()
	addAll(d, 20*listdecode.Chunk, func(int) bool { return false })
	entries, _, err := d.Finish()
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, entries)
	assert.LessOrEqual(t, calls.Load(), int64(3*listdecode.Chunk), "nothing added after the end is decoded")
}
