// Package listdecode decodes the values of a store's List into informer
// entries on several goroutines, for the stores of this module (etcdstore,
// pgstore, sqlitestore). Decoding, not reading, is most of a large List: a
// JSON value of ~550 B takes a few microseconds, so a million of them on
// the goroutine that reads them keep one core busy while the others idle,
// and the read waits for the decode.
package listdecode

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/informer"
)

// Chunk is how many values a decoder takes at a time: large enough that
// the hand-over costs nothing beside decoding, small enough that the
// decoders finish soon after the last value arrives. A List of fewer
// values is decoded on the caller's goroutine, in Finish.
const Chunk = 256

// DecodeFunc decodes the value of key written at rev. It is called on
// several goroutines at once, so it must be safe for concurrent use (as
// informer.Codec requires), and must not block.
type DecodeFunc[V any] func(key string, rev informer.Revision, data []byte) (V, error)

// Decoder decodes the values given to Add while the caller goes on reading
// more: once a chunk is full it goes to up to GOMAXPROCS goroutines, which
// start with the first full chunk. Finish must be called, once, also on a
// List that failed (it stops the goroutines). Add and Finish must be called
// from one goroutine.
type Decoder[V any] struct {
	ctx     context.Context
	decode  DecodeFunc[V]
	work    chan *batch[V] // full batches, in order; nil until the decoders start
	batches []*batch[V]    // every batch, in order
	cur     *batch[V]      // the batch being filled, not yet handed over
	wg      sync.WaitGroup
	inline  bool        // GOMAXPROCS is 1: decode each full batch in Add
	stopped atomic.Bool // ctx ended before every value was decoded
}

// batch is one chunk of values; its entries are written by the decoder
// that takes it and read by Finish after the decoders are done.
type batch[V any] struct {
	entries []informer.Entry[string, V]
	data    [][]byte
	bad     int
}

// New returns a Decoder that decodes with decode and stops decoding once
// ctx is done (Finish then returns ctx's error).
func New[V any](ctx context.Context, decode DecodeFunc[V]) *Decoder[V] {
	return &Decoder[V]{ctx: ctx, decode: decode, inline: runtime.GOMAXPROCS(0) == 1}
}

// Add queues the value of key written at rev. The Decoder keeps data until
// it is decoded: the caller must not reuse it.
func (d *Decoder[V]) Add(key string, rev informer.Revision, data []byte) {
	if d.stopped.Load() {
		return
	}
	if d.cur == nil {
		d.cur = &batch[V]{entries: make([]informer.Entry[string, V], 0, Chunk), data: make([][]byte, 0, Chunk)}
		d.batches = append(d.batches, d.cur)
	}
	b := d.cur
	b.entries = append(b.entries, informer.Entry[string, V]{Key: key, Revision: rev})
	b.data = append(b.data, data)
	if len(b.entries) < Chunk {
		return
	}
	d.cur = nil
	if d.inline {
		d.run(b)
		return
	}
	if d.work == nil {
		procs := runtime.GOMAXPROCS(0)
		d.work = make(chan *batch[V], 2*procs)
		for range procs {
			d.wg.Go(d.worker)
		}
	}
	d.work <- b
}

// worker decodes batches until there are no more; once ctx is done it
// only drains them, so that Add never blocks on a stopped Decoder.
func (d *Decoder[V]) worker() {
	for b := range d.work {
		d.run(b)
	}
}

// run decodes one batch, unless ctx is done.
func (d *Decoder[V]) run(b *batch[V]) {
	if d.ctx.Err() != nil {
		d.stopped.Store(true)
		return
	}
	for i := range b.entries {
		e := &b.entries[i]
		v, err := d.decode(e.Key, e.Revision, b.data[i])
		if err != nil {
			var zero V
			v = zero // a codec may return a partial value with its error
			b.bad++
		}
		e.Value, e.Err = v, err
	}
	b.data = nil // the encoded values can go before the List ends
}

// Finish decodes what is left, waits for the decoders, and returns every
// entry in the order Add was given them, each with its key, revision, and
// either its value or the decode function's error as Err (and the zero
// V), with the number of entries that have Err. It returns ctx's error,
// and no entries, if ctx ended before every value was decoded.
func (d *Decoder[V]) Finish() (entries []informer.Entry[string, V], bad int, err error) {
	if b := d.cur; b != nil {
		d.cur = nil
		if d.work == nil {
			d.run(b)
		} else {
			d.work <- b
		}
	}
	if d.work != nil {
		close(d.work)
		d.wg.Wait()
	}
	if d.stopped.Load() {
		return nil, 0, d.ctx.Err()
	}
	if len(d.batches) == 1 {
		b := d.batches[0]
		return b.entries, b.bad, nil
	}
	n := 0
	for _, b := range d.batches {
		n += len(b.entries)
	}
	entries = make([]informer.Entry[string, V], 0, n)
	for _, b := range d.batches {
		entries = append(entries, b.entries...)
		bad += b.bad
	}
	return entries, bad, nil
}
