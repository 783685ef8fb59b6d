package httpstore

import (
	"bufio"
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
// decode is a Put with Err set. With ClientOptions.Selector, a key that
// leaves the selection is a Delete (see "Selections" in the package
// documentation). The response is closed before Watch
// returns; Watch starts no goroutine.
func (c *Client[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	op := fmt.Sprintf("watch after %d", after)
	q := url.Values{"after": {strconv.FormatUint(uint64(after), 10)}}
	if c.selector != nil {
		q.Set(selectorParam, c.selector.Get(selectorParam))
	}
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
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
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
			return fmt.Errorf("httpstore: %s: a line of the stream is not an event: %w", op, err)
		}
		rev := informer.Revision(we.Revision)
		var e informer.Event[string, V]
		switch we.Type {
		case typePut:
			e = informer.Event[string, V]{Type: informer.Put, Key: we.Key, Revision: rev}
			e.Value, e.Err = decodeValue[V](we.Key, we.Value, we.Error)
		case typeDelete:
			e = informer.Event[string, V]{Type: informer.Delete, Key: we.Key, Revision: rev}
			// A deleted value that does not decode is the zero V: the
			// informer delivers its own last value.
			e.Value, _ = decodeValue[V](we.Key, we.Value, "")
		case typeBookmark:
			if rev <= last {
				continue
			}
			e = informer.Event[string, V]{Type: informer.Bookmark, Revision: rev}
		case typeError:
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
			return fmt.Errorf("httpstore: %s: unknown event type %q", op, we.Type)
		}
		if err := emit(e); err != nil {
			return err
		}
		if rev > last {
			last = rev
		}
	}
}
