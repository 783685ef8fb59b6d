package httpstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
)

// stream writes a watch's lines to its response. The store's Watch writes
// events from its own goroutine while the handler's goroutine flushes and
// writes bookmarks, so every use of the ResponseWriter holds mu. Headers
// are sent with the first line: a watch that fails before it (an expired
// revision, the usual case) is answered with its status, 410 for an
// expiry.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// timeout bounds each write and flush (WatchWriteTimeout).
	timeout time.Duration

	mu sync.Mutex
	// started says that the status and a first line were written.
	started bool
	// rev is the revision of the last line written, or the watch's start.
	rev uint64
	// dirty is signalled after a write, so that the handler flushes; one
	// flush carries everything written meanwhile.
	dirty chan struct{}
}

// line writes one line. s.mu must be held.
func (s *stream) line(e wireEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if !s.started {
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	s.deadline()
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return err
	}
	if e.Revision > s.rev {
		s.rev = e.Revision
	}
	return nil
}

// flush sends what was written.
func (s *stream) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.deadline()
	return s.rc.Flush()
}

// deadline sets the connection's write deadline for the next write. A
// ResponseWriter that cannot (a test recorder) writes without one.
func (s *stream) deadline() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}

// watch serves /watch?after=R.
func (s *Server[V]) watch(w http.ResponseWriter, r *http.Request) {
	var after uint64
	if a := r.URL.Query().Get("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			refuse(w, http.StatusBadRequest, codeBadRequest, "after: "+err.Error())
			return
		}
		after = n
	}
	match, ok := s.selector(w, r)
	if !ok {
		return
	}
	var sel *selection[V]
	if match != nil {
		entries, listed, err := s.store.List(r.Context())
		if err != nil {
			refuseErr(w, "watch: listing for the selection", err)
			return
		}
		sel = newSelection(match, entries, listed)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := &stream{w: w, rc: http.NewResponseController(w), timeout: s.opts.WatchWriteTimeout, rev: after, dirty: make(chan struct{}, 1)}
	emit := func(ev informer.Event[string, V]) error {
		if sel != nil {
			var send bool
			if ev, send = sel.filter(ev); !send {
				// The next bookmark carries the revision, so that a
				// resumed watch need not replay what was left out.
				st.mu.Lock()
				st.rev = max(st.rev, uint64(ev.Revision))
				st.mu.Unlock()
				return nil
			}
		}
		e := wireEvent{Key: ev.Key, Revision: uint64(ev.Revision)}
		switch ev.Type {
		case informer.Put:
			e.Type = typePut
			if ev.Err != nil {
				e.Error = ev.Err.Error()
			} else {
				e.Value, e.Error = marshal(ev.Value)
			}
		case informer.Delete:
			e.Type = typeDelete
			e.Value, _ = marshal(ev.Value)
		default:
			e.Type, e.Key = typeBookmark, ""
		}
		st.mu.Lock()
		err := st.line(e)
		st.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case st.dirty <- struct{}{}:
		default:
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.store.Watch(ctx, informer.Revision(after), emit) }()

	ticker := s.opts.Clock.NewTicker(s.opts.BookmarkInterval)
	defer ticker.Stop()
	for {
		select {
		case <-st.dirty:
			if st.flush() != nil {
				cancel() // the client is gone or stopped reading
			}
		case <-ticker.C():
			st.mu.Lock()
			err := st.line(wireEvent{Type: typeBookmark, Revision: st.rev})
			st.mu.Unlock()
			if err != nil || st.flush() != nil {
				cancel() // the client is gone or stopped reading
			}
		case err := <-done:
			s.endWatch(st, r.Context(), err)
			return
		}
	}
}

// endWatch answers the end of the store's Watch: with its status if nothing
// was sent yet, else with an ERROR line, unless the client went away.
func (s *Server[V]) endWatch(st *stream, reqCtx context.Context, err error) {
	if reqCtx.Err() != nil {
		return
	}
	if err == nil { // a store breaking the Source contract
		err = errors.New("the store's watch ended without an error")
	}
	status, code := statusOf(err)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.started {
		refuse(st.w, status, code, "watch: "+err.Error())
		return
	}
	_ = st.line(wireEvent{Type: typeError, Code: code, Error: "watch: " + err.Error()})
	_ = st.rc.Flush()
}
