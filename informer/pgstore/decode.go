package pgstore

import (
	"runtime"
	"sync"

	"github.com/converge-go/converge/informer"
)

// decodeChunk is how many rows a List hands a decoder at a time: large
// enough that the hand-over costs nothing beside decoding, small enough
// that the decoders finish soon after the last row arrives.
const decodeChunk = 256

// listDecoder decodes a List's values on GOMAXPROCS goroutines while the
// rows are still arriving. Decoded on the goroutine that reads them, 100k
// JSON values of ~550 B took ~0.6 s of a ~2 s initial sync that one SELECT
// plus a decode on two goroutines does in ~1.4 s
// (a CPU profile of BenchmarkPgstoreInitialSync): the read waited for the decode, one core
// idled.
//
// Entries come out in the rows' order. A value that does not decode is an
// entry with Err set (a *DecodeError), never a failed List: one bad value
// must not keep every other key of the collection out of the informer.
type listDecoder[V any] struct {
	s      *Store[V]
	work   chan *decodeBatch[V] // filled chunks, in order; closed by finish
	chunks []*decodeBatch[V]    // every chunk, in order
	cur    *decodeBatch[V]      // the chunk being filled (not yet sent)
	wg     sync.WaitGroup
}

// decodeBatch is one chunk of rows; entries are written by the decoder
// that takes it and read after the decoders are done.
type decodeBatch[V any] struct {
	keys    []string
	revs    []int64
	data    [][]byte
	entries []informer.Entry[string, V]
}

// newListDecoder starts the decoders. finish must be called.
func (s *Store[V]) newListDecoder() *listDecoder[V] {
	procs := runtime.GOMAXPROCS(0)
	d := &listDecoder[V]{s: s, work: make(chan *decodeBatch[V], 2*procs)}
	for range procs {
		d.wg.Go(d.decode)
	}
	return d
}

// add queues one row for decoding. data must not be reused by the caller.
func (d *listDecoder[V]) add(key string, rev int64, data []byte) {
	if d.cur == nil {
		d.cur = &decodeBatch[V]{keys: make([]string, 0, decodeChunk),
			revs: make([]int64, 0, decodeChunk), data: make([][]byte, 0, decodeChunk)}
		d.chunks = append(d.chunks, d.cur)
	}
	c := d.cur
	c.keys, c.revs, c.data = append(c.keys, key), append(c.revs, rev), append(c.data, data)
	if len(c.keys) == decodeChunk {
		d.work <- c
		d.cur = nil
	}
}

// decode is one decoder: it decodes chunks until there are no more.
func (d *listDecoder[V]) decode() {
	for c := range d.work {
		c.entries = make([]informer.Entry[string, V], len(c.keys))
		for j, data := range c.data {
			e := &c.entries[j]
			e.Key, e.Revision = c.keys[j], informer.Revision(c.revs[j])
			e.Value, e.Err = d.s.decode(c.keys[j], c.revs[j], data)
		}
		c.data = nil // the encoded values can go before the List ends
	}
}

// finish waits for the decoders and returns every entry in the rows'
// order. It is also how a List that failed stops the decoders (it then
// ignores the result).
func (d *listDecoder[V]) finish() []informer.Entry[string, V] {
	if d.cur != nil {
		d.work <- d.cur
		d.cur = nil
	}
	close(d.work)
	d.wg.Wait()
	n := 0
	for _, c := range d.chunks {
		n += len(c.entries)
	}
	entries := make([]informer.Entry[string, V], 0, n)
	for _, c := range d.chunks {
		entries = append(entries, c.entries...)
	}
	return entries
}

// decode decodes the value of key written at rev, or returns a
// *DecodeError and the zero V.
func (s *Store[V]) decode(key string, rev int64, data []byte) (V, error) {
	v, err := s.opts.codec.Unmarshal(data)
	if err != nil {
		var zero V
		return zero, &DecodeError{Collection: s.coll, Key: key, Revision: informer.Revision(rev), Err: err}
	}
	return v, nil
}
