package httpstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/converge-go/converge/informer"
)

// maxBatch is the most events watchBatch hands over at once.
const maxBatch = 256

// errIdle is the cause of a watch request ended by ClientOptions.IdleTimeout.
var errIdle = errors.New("the stream was idle too long")

// Watch calls emit for every change after revision after, in revision
// order, until ctx is done (it returns an error matching ctx.Err()), emit
// fails (it returns emit's error) or the watch fails: an expired revision
// matches informer.ErrRevisionExpired; a server that went away, a stream
// that ended, or one that sent no line for ClientOptions.IdleTimeout, is
// any other error, after which the caller (the
// informer) watches again after the last revision it saw. Bookmarks are
// passed on when they move the revision forward. A value that does not
// decode is a Put with Err set. The response is closed before Watch
// returns; Watch starts no goroutine.
func (c *Client[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	return c.watchBatch(ctx, after, func(evs []informer.Event[string, V]) error {
		for _, e := range evs {
			if err := emit(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// watchBatch is Watch, handing over at once the events that arrived
// together (at most 256): a burst that the server flushed in one write is
// one batch. The slice is reused once emit returns.
func (c *Client[V]) watchBatch(ctx context.Context, after informer.Revision, emit func([]informer.Event[string, V]) error) error {
	op := fmt.Sprintf("watch after %d", after)
	q := url.Values{"after": {strconv.FormatUint(uint64(after), 10)}}
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The idle timer ends the request, which fails the read it waits in;
	// every line read resets it.
	idle := func() {}
	if c.idle > 0 {
		t := time.AfterFunc(c.idle, func() { cancel(errIdle) })
		defer t.Stop()
		idle = func() { t.Reset(c.idle) }
	}
	idleErr := func() error {
		if ctx.Err() == nil && errors.Is(context.Cause(reqCtx), errIdle) {
			return fmt.Errorf("httpstore: %s: no line from the server for %v (ClientOptions.IdleTimeout) after revision %d: %w", op, c.idle, after, errIdle)
		}
		return nil
	}
	resp, err := c.do(reqCtx, op, http.MethodGet, "watch", q, nil, http.StatusOK)
	if err != nil {
		if ierr := idleErr(); ierr != nil {
			return ierr
		}
		return err
	}
	// Closing the body is what ends a read blocked on an idle stream
	// when ctx is done; the transport does that, and this makes sure.
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	last := after
	batch := make([]informer.Event[string, V], 0, 16)
	// flush hands the batch over: when no whole line waits behind it, and
	// before the watch ends, so that events before a failure are emitted.
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := emit(batch)
		clear(batch)
		batch = batch[:0]
		return err
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			if ctx.Err() != nil {
				return fmt.Errorf("httpstore: %s: %w", op, ctx.Err())
			}
			if ierr := idleErr(); ierr != nil {
				return ierr
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("httpstore: %s: the server ended the stream after revision %d", op, last)
			}
			return fmt.Errorf("httpstore: %s: reading the stream after revision %d: %w", op, last, err)
		}
		idle()
		var we wireEvent
		if err := json.Unmarshal(line, &we); err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("httpstore: %s: a line of the stream is not an event: %w", op, err)
		}
		rev := informer.Revision(we.Revision)
		switch we.Type {
		case typePut:
			e := informer.Event[string, V]{Type: informer.Put, Key: we.Key, Revision: rev}
			e.Value, e.Err = decodeValue[V](we.Key, we.Value, we.Error)
			batch = append(batch, e)
		case typeDelete:
			e := informer.Event[string, V]{Type: informer.Delete, Key: we.Key, Revision: rev}
			// A deleted value that does not decode is the zero V: the
			// informer delivers its own last value.
			e.Value, _ = decodeValue[V](we.Key, we.Value, "")
			batch = append(batch, e)
		case typeBookmark:
			if rev > last {
				batch = append(batch, informer.Event[string, V]{Type: informer.Bookmark, Revision: rev})
			}
		case typeError:
			if err := flush(); err != nil {
				return err
			}
			// The stream's status was 200; the status the server would
			// have answered with, had it failed before the first line,
			// is the one this error stands for.
			status := http.StatusInternalServerError
			if we.Code == codeExpired {
				status = http.StatusGone
			}
			e := &Error{Op: op, URL: resp.Request.URL.String(), StatusCode: status, Code: we.Code, Message: we.Error}
			e.sentinel = sentinelOf(we.Code)
			return e
		default:
			if err := flush(); err != nil {
				return err
			}
			return fmt.Errorf("httpstore: %s: unknown event type %q", op, we.Type)
		}
		if rev > last {
			last = rev
		}
		if len(batch) == maxBatch || !lineBuffered(r) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// lineBuffered says whether r holds a whole line it can return without
// reading, so that watchBatch adds it to the batch instead of handing the
// batch over.
func lineBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}
