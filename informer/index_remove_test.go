package informer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/internal/must"
)

func TestRemoveIndexShouldDropOneIndexAndKeepTheOthersFollowingChanges(t *testing.T) {
	src := newScript()
	inf := must.Do(informer.New("t", src, quiet, informer.WithIndex("parity", parity)))
	src.list(10, map[string]int{"a": 1, "b": 2})
	start(t, inf)
	w := src.nextWatch(t)
	tens := func(_ string, v int) []string { return []string{string(rune('0' + v/10))} }
	require.NoError(t, inf.AddIndex("tens", tens))

	assert.True(t, inf.RemoveIndex("parity"), "an index given to New")
	assert.False(t, inf.RemoveIndex("parity"), "gone already")
	assert.False(t, inf.HasIndex("parity"))
	assert.Panics(t, func() { inf.ByIndex("parity", "odd") })
	w.put(t, "b", 12, 11)
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("tens", "0")), "the index after it still follows changes")
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("tens", "1")))

	require.NoError(t, inf.AddIndex("parity", parity), "the name can be added again")
	assert.Equal(t, []string{"a"}, keysOf(inf.ByIndex("parity", "odd")))
	assert.Equal(t, []string{"b"}, keysOf(inf.ByIndex("parity", "even")))
}
