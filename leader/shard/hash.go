package shard

// FNV-1a, 64 bits: the hash of a key to its bucket. It is fixed forever
// for a deployment (a different hash would move every key), and written
// out here rather than taken from hash/fnv so that the function is plainly
// the documented one and allocates nothing.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnv1a64 returns the 64-bit FNV-1a hash of s's bytes.
func fnv1a64(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// BucketOf returns the bucket of key among buckets buckets: the 64-bit
// FNV-1a hash of key's bytes (offset basis 14695981039346656037, prime
// 1099511628211) modulo buckets, so that a program in another language
// computes the same bucket. buckets must be positive; BucketOf panics
// otherwise, as a division by zero would.
func BucketOf(key string, buckets int) int {
	if buckets <= 0 {
		panic("shard.BucketOf: buckets must be positive")
	}
	return int(fnv1a64(key) % uint64(buckets))
}
