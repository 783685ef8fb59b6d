package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuantityShouldParseAsKubernetesWritesIt(t *testing.T) {
	for in, want := range map[Quantity]int64{
		"500m": 500, "2": 2000, "0.5": 500, "1Ki": 1024 * 1000, "256Mi": 256 << 20 * 1000, "1G": 1e9 * 1000,
	} {
		got, err := in.Milli()
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []Quantity{"", "x", "-1", "1Zi", "NaN"} {
		_, err := bad.Milli()
		assert.Error(t, err, bad)
	}
}

func TestSplitKeyShouldUndoKey(t *testing.T) {
	for _, k := range [][2]string{{"default", "web"}, {"", "n1"}} {
		ns, name := SplitKey(Key(k[0], k[1]))
		assert.Equal(t, k, [2]string{ns, name})
	}
}

func TestEmptySelectorShouldSelectNothing(t *testing.T) {
	assert.False(t, LabelSelector{}.Matches(map[string]string{"app": "web"}))
	assert.True(t, LabelSelector{MatchLabels: map[string]string{"app": "web"}}.Matches(map[string]string{"app": "web", "x": "y"}))
	assert.False(t, LabelSelector{MatchLabels: map[string]string{"app": "web"}}.Matches(map[string]string{"app": "db"}))
}
