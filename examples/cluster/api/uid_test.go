package api

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewUIDShouldBeAFreshVersion4UUIDEachCall(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		u := NewUID()
		assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), u)
		assert.False(t, seen[u], "UID %s returned twice", u)
		seen[u] = true
	}
}
