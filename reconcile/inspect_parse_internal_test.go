package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

type podName string

type shown int

func (s shown) String() string { return "#" + string(rune('0'+s)) }

func TestParseKeyShouldReadStringAndIntegerKindsAndRefuseOthers(t *testing.T) {
	if k, ok := parseKey[podName]("web-1"); assert.True(t, ok) {
		assert.Equal(t, podName("web-1"), k)
	}
	if k, ok := parseKey[int64]("-42"); assert.True(t, ok) {
		assert.Equal(t, int64(-42), k)
	}
	if k, ok := parseKey[uint8]("200"); assert.True(t, ok) {
		assert.Equal(t, uint8(200), k)
	}
	_, ok := parseKey[uint8]("300")
	assert.False(t, ok, "out of range")
	_, ok = parseKey[int]("x")
	assert.False(t, ok)
	_, ok = parseKey[shown]("3")
	assert.False(t, ok, "a String method renders it otherwise: found by fmt.Sprint instead")
	_, ok = parseKey[struct{ A int }]("{1}")
	assert.False(t, ok)
}
