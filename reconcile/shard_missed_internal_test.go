package reconcile

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMissedShouldRememberAKeyForAtLeastHalfItsKeepAndForgetItAfterItsKeep(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	m := missed[string]{keep: 10 * time.Second}
	m.add(3, "a", t0)
	m.add(3, "b", t0.Add(4*time.Second))
	m.add(5, "c", t0.Add(4*time.Second))
	got := m.take(3, t0.Add(9*time.Second))
	slices.Sort(got)
	assert.Equal(t, []string{"a", "b"}, got, "both within keep")
	assert.Empty(t, m.take(3, t0.Add(9*time.Second)), "taken once")
	assert.Equal(t, []string{"c"}, m.take(5, t0.Add(9*time.Second)), "another bucket's key is kept")

	m.add(7, "d", t0.Add(20*time.Second))
	assert.Equal(t, []string{"d"}, m.take(7, t0.Add(24*time.Second)), "kept keep/2")
	m.add(7, "e", t0.Add(30*time.Second))
	assert.Empty(t, m.take(7, t0.Add(41*time.Second)), "forgotten after keep")
}

func TestMissedShouldStopRememberingPastItsBound(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	m := missed[int]{keep: time.Minute}
	for k := range maxMissed + 10 {
		m.add(k%4, k, t0)
	}
	n := 0
	for b := range 4 {
		n += len(m.take(b, t0))
	}
	assert.Equal(t, maxMissed, n)
}
