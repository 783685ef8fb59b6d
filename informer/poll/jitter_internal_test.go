package poll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestJitteredShouldMapTheUnitIntervalOntoTheBounds(t *testing.T) {
	d := 10 * time.Second
	assert.Equal(t, 8*time.Second, jittered(d, 0.2, 0))
	assert.Equal(t, d, jittered(d, 0.2, 0.5))
	assert.InDelta(t, float64(12*time.Second), float64(jittered(d, 0.2, 0.9999999)), float64(time.Millisecond))
	assert.Equal(t, d, jittered(d, 0, 0.9), "no jitter")
	assert.Equal(t, time.Duration(0), jittered(d, 1, 0), "full jitter reaches zero")
}
