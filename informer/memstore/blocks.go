package memstore

import "iter"

// blockLen is the number of elements in every block of a blocks but the
// first, which grows by append up to it. Growing a block copies at most
// blockLen elements; for the history's changes (about 40 bytes with a
// string key and a pointer value) that is 80 KB, tens of microseconds.
const blockLen = 2048

// blocks is a sequence of T kept in blocks of blockLen elements, so that
// growing it never copies what it already holds. A slice grown by append
// copies itself whole at each doubling: at a 100k-change history that is
// one write in thousands taking a millisecond, in the path of every
// writer and every watcher waiting on it. The first block grows by append,
// so that a small store costs what a slice would; later ones are
// allocated whole, since a store that filled one block will likely fill
// more. The zero value is empty and ready to use.
type blocks[T any] struct {
	// b holds the blocks: every one but the last is full (blockLen
	// elements); the last holds the rest, n%blockLen of them or blockLen.
	// At most one empty block follows them (kept so that a sequence
	// going back and forth across a block's edge allocates nothing).
	b [][]T
	n int
}

// len is the number of elements.
func (s *blocks[T]) len() int { return s.n }

// at returns the i'th element, 0 <= i < len().
func (s *blocks[T]) at(i int) *T { return &s.b[i/blockLen][i%blockLen] }

// push appends v.
func (s *blocks[T]) push(v T) {
	k := s.n / blockLen
	if k == len(s.b) {
		var blk []T
		if k > 0 {
			blk = make([]T, 0, blockLen)
		}
		s.b = append(s.b, blk)
	}
	s.b[k] = append(s.b[k], v)
	s.n++
}

// pop removes the last element, zeroing its place so that what it refers
// to can be collected, and gives back blocks left empty but one.
func (s *blocks[T]) pop() {
	s.n--
	k, i := s.n/blockLen, s.n%blockLen
	var zero T
	s.b[k][i] = zero
	s.b[k] = s.b[k][:i]
	// The blocks holding elements, and one empty block after them.
	if keep := (s.n+blockLen-1)/blockLen + 1; len(s.b) > keep {
		clear(s.b[keep:])
		s.b = s.b[:keep]
	}
}

// all yields the elements in order.
func (s *blocks[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, blk := range s.b {
			for _, v := range blk {
				if !yield(v) {
					return
				}
			}
		}
	}
}
