package backoff

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPerKeyForgetShouldReleaseTheKeysMemory(t *testing.T) {
	p := NewPerKey[int](Exponential{})
	for k := range 1000 {
		p.When(k)
		p.When(k)
	}
	assert.Len(t, p.failures, 1000)

	for k := range 1000 {
		p.Forget(k)
	}
	assert.Empty(t, p.failures)

	// NumRequeues must not create entries either.
	p.NumRequeues(1)
	assert.Empty(t, p.failures)
}
