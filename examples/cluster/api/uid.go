package api

import (
	"crypto/rand"
	"fmt"
)

// NewUID returns a fresh object UID: a random (version 4) UUID in its
// usual text form, as the Kubernetes API server gives every object it
// creates. Whoever creates an object sets its UID; owner references name
// it, so that an object recreated under the same name is a different owner.
func NewUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
