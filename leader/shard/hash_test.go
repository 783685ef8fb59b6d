package shard_test

import (
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/leader/shard"
)

// Fixed vectors, the hashes computed by an independent implementation
// (Python, from the FNV definition): these buckets are part of the wire contract (another
// language must compute the same), so a change here breaks deployments.
func TestBucketOfShouldMatchTheDocumentedFNV1aVectors(t *testing.T) {
	for _, tc := range []struct {
		key     string
		buckets int
		want    int
	}{
		{"", 64, 0xcbf29ce484222325 % 64},
		{"a", 64, 0xaf63dc4c8601ec8c % 64},
		{"foobar", 64, 0x85944171f73967e8 % 64},
		{"foobar", 1000, 0x85944171f73967e8 % 1000},
		{"default/widget-1", 64, 0xb0697841d32cf581 % 64}, // = 1
		{"ünïcode", 256, 0xb1b0d40350a25beb % 256},        // UTF-8 bytes; = 235
	} {
		assert.Equal(t, tc.want, shard.BucketOf(tc.key, tc.buckets), "BucketOf(%q, %d)", tc.key, tc.buckets)
	}
}

func TestBucketOfShouldAgreeWithTheStandardLibrarysFNV1a(t *testing.T) {
	for _, key := range []string{"", "x", "default/widget-1", "a much longer key with spaces / and slashes"} {
		h := fnv.New64a()
		h.Write([]byte(key))
		assert.Equal(t, int(h.Sum64()%97), shard.BucketOf(key, 97), "key %q", key)
	}
}

func TestBucketOfShouldPanicForNoBuckets(t *testing.T) {
	assert.Panics(t, func() { shard.BucketOf("a", 0) })
}
