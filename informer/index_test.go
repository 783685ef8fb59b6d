package informer_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestAddIndexBeforeRunIndexesTheFirstListAndLaterChanges(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet))
	require.NoError(t, inf.AddIndex("parity", parity))
	assert.True(t, inf.HasIndex("parity"))
	src.list(10, map[string]int{"a": 1, "b": 2})
	start(t, inf)
	w := src.nextWatch(t)
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("parity", "odd")))
	w.put(t, "a", 4, 11)
	assert.Equal(t, []string{"a", "b"}, keysOf(inf.ByIndex("parity", "even")))
	assert.Empty(t, inf.ByIndex("parity", "odd"))
}

func TestAddIndexOnARunningInformerFilesTheCachedEntriesThenFollowsChanges(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	src.list(10, map[string]int{"a": 1, "b": 2, "c": 3})
	start(t, inf)
	w := src.nextWatch(t)
	require.False(t, inf.HasIndex("tens"))

	tens := func(_ string, v int) []string { return []string{string(rune('0' + v/10))} }
	require.NoError(t, inf.AddIndex("tens", tens))

	assert.True(t, inf.HasIndex("tens"))
	assert.Equal(t, []string{"a", "b", "c"}, keysOf(inf.ByIndex("tens", "0")))
	w.put(t, "b", 12, 11)
	w.del(t, "c", 12)
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("tens", "0")))
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("tens", "1")))
	// The index given to New is unchanged by the new one.
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("parity", "odd")))
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("parity", "even")))
}

func TestAddIndexRejectsANameInUseANilFuncAndAPanicWithoutChangingAnything(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	src.list(10, map[string]int{"a": 1})
	start(t, inf)
	src.nextWatch(t)

	err := inf.AddIndex("parity", func(string, int) []string { return []string{"x"} })
	require.ErrorContains(t, err, `AddIndex("parity")`)
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("parity", "odd")), "the old index is kept")

	require.ErrorContains(t, inf.AddIndex("nil", nil), "nil IndexFunc")
	assert.False(t, inf.HasIndex("nil"))

	err = inf.AddIndex("boom", func(string, int) []string { panic("boom") })
	require.ErrorContains(t, err, "boom")
	assert.False(t, inf.HasIndex("boom"))
	assert.Panics(t, func() { inf.ByIndex("boom", "x") })
}

// TestAddIndexRacesWithChangesAndReaders is for -race: AddIndex, HasIndex
// and ByIndex from other goroutines while the informer applies changes.
func TestAddIndexRacesWithChangesAndReaders(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet))
	src.list(1, map[string]int{"a": 1})
	start(t, inf)
	w := src.nextWatch(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			w.put(t, "k", i, informer.Revision(i+2))
		}
	})
	wg.Go(func() {
		for range 200 {
			if inf.HasIndex("parity") {
				_ = inf.ByIndex("parity", "odd")
			}
		}
	})
	require.NoError(t, inf.AddIndex("parity", parity))
	wg.Wait()
	assert.Equal(t, []string{"a", "k"}, keysOf(inf.ByIndex("parity", "odd")))
}
