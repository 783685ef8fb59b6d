package api

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/object"
)

// The write helpers keep finalizers, deletion requests and generations
// only for values that are object.Objects (and SpecObjects).
func TestEveryKindShouldBeAnObjectAndTheWorkloadsSpecObjects(t *testing.T) {
	for _, v := range []any{&Deployment{}, &ReplicaSet{}, &Pod{}, &Node{}, &Lease{}} {
		_, ok := v.(object.Object)
		assert.True(t, ok, "%T is an object.Object", v)
	}
	for _, v := range []any{&Deployment{}, &ReplicaSet{}} {
		_, ok := v.(object.SpecObject)
		assert.True(t, ok, "%T is an object.SpecObject", v)
	}
}
