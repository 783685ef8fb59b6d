package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/converge-go/converge/informer"
)

// DecodeError says that an object does not decode into V: it is the Err of
// a List entry or a Watch Put (the key is bad, the stream goes on), and the
// error of a Get. Match it with errors.As.
type DecodeError struct {
	Key      string
	Revision informer.Revision
	Err      error // the codec's
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("kube: object %q at resourceVersion %d does not decode: %v", e.Key, e.Revision, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// frame is one event of a watch stream.
type frame struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// initialEventsEnd is the annotation of the bookmark that ends a streaming
// list's initial events.
const initialEventsEnd = "k8s.io/initial-events-end"

// decode reads one object, JSON or (pb) protobuf without its envelope:
// its key and revision, and its value, with Err set if the codec (or the
// protobuf decoder) fails. An object without a name or a valid
// resourceVersion is an error (it cannot be keyed). transform applies the
// Store's transform.
func (s *Store[V]) decode(raw []byte, pb, transform bool) (informer.Entry[string, V], *objectMeta, error) {
	var (
		m      *objectMeta
		v      V
		decErr error
	)
	if pb && s.opts.protobuf != nil {
		var err error
		if m, err = protoMeta(raw, false); err != nil {
			return informer.Entry[string, V]{}, nil, fmt.Errorf("kube: %s: %w", s.gvr.Resource, err)
		}
		v, decErr = s.opts.protobuf(raw)
	} else {
		if pb {
			return informer.Entry[string, V]{}, nil, fmt.Errorf("kube: %s: a protobuf object to a Store without WithProtobuf", s.gvr.Resource)
		}
		var env envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			return informer.Entry[string, V]{}, nil, fmt.Errorf("kube: %s: an object that is not JSON: %w", s.gvr.Resource, err)
		}
		m = &env.Metadata
		v, decErr = s.opts.codec.Unmarshal(raw)
	}
	rev, err := parseRevision(m.ResourceVersion)
	if err != nil {
		return informer.Entry[string, V]{}, nil, err
	}
	if m.Name == "" {
		return informer.Entry[string, V]{}, nil, fmt.Errorf("kube: %s: an object without a name", s.gvr.Resource)
	}
	e := informer.Entry[string, V]{Key: s.key(m), Revision: rev}
	if decErr != nil {
		s.decodeErrors.Add(1)
		e.Err = &DecodeError{Key: e.Key, Revision: rev, Err: decErr}
		return e, m, nil
	}
	fromServer(&v, m)
	if transform && s.opts.transform != nil {
		s.opts.transform(e.Key, &v)
	}
	e.Value = v
	return e, m, nil
}

// eventMeta reads the metadata of a watch event's object (a bookmark's),
// annotations included.
func eventMeta(obj []byte, pb bool) (*objectMeta, error) {
	if pb {
		return protoMeta(obj, true)
	}
	var env envelope
	if err := json.Unmarshal(obj, &env); err != nil {
		return nil, err
	}
	return &env.Metadata, nil
}

// List returns every object (that the selectors match) and the
// resourceVersion of the snapshot, each entry with its own resourceVersion.
// It streams the list or reads it in pages, as WithListMode says. Either
// way the snapshot is one consistent state of the resource, never older
// than anything this Store has returned or written: a paginated List asks
// for a state not older than the highest revision the Store has seen (its
// writes', its lists', its watches' events), which the server serves from
// its watch cache, as client-go's reflector lists. It may be behind
// another client's write by the cache's lag (milliseconds), which the
// watch that follows brings; the server waits (up to seconds) for its
// cache to reach the revision asked for.
func (s *Store[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	if err := s.resolve(ctx); err != nil {
		return nil, 0, err
	}
	mode := s.opts.listMode
	if mode == ListAuto && s.streamingUnsupported.Load() {
		mode = ListPaginated
	}
	if mode != ListPaginated {
		entries, rev, err := s.listStreaming(ctx)
		if err == nil {
			s.streamedLists.Add(1)
			s.seen(rev, nil)
			return entries, rev, nil
		}
		var refused *streamingRefused
		if mode == ListStreaming || !errors.As(err, &refused) {
			return nil, 0, err
		}
		s.streamingUnsupported.Store(true)
	}
	entries, rev, err := s.listPages(ctx)
	if err == nil {
		s.paginatedLists.Add(1)
		s.seen(rev, nil)
	}
	return entries, rev, err
}

// listPages lists in pages: the first at a state not older than the
// highest revision seen (from the watch cache, which answers the Store's
// first list, at resourceVersion 0, in one page; a consistent read from
// etcd for a Locks' Store), the others at its resourceVersion through the
// continue token.
func (s *Store[V]) listPages(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	q := s.selectors()
	q.Set("limit", strconv.Itoa(s.opts.pageSize))
	switch floor := s.floor.Load(); {
	case s.consistentLists:
	case floor == 0:
		// Any state will do: the cache answers with every object at
		// once, whatever the limit, as to client-go's first list.
		q.Set("resourceVersion", "0")
	default:
		q.Set("resourceVersion", formatRevision(informer.Revision(floor)))
		q.Set("resourceVersionMatch", "NotOlderThan")
	}
	var entries []informer.Entry[string, V]
	path := s.collectionPath(s.opts.namespace)
	for {
		data, pb, err := s.c.get(ctx, path, q, s.accept())
		if err != nil {
			return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
		}
		s.read(pb)
		rv, cont, items, err := decodePage(data, pb)
		if err != nil {
			return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
		}
		if entries == nil {
			entries = make([]informer.Entry[string, V], 0, len(items))
		}
		for _, raw := range items {
			e, _, err := s.decode(raw, pb, true)
			if err != nil {
				return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
			}
			entries = append(entries, e)
		}
		if cont == "" {
			rev, err := parseRevision(rv)
			if err != nil {
				return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
			}
			return entries, rev, nil
		}
		q.Set("continue", cont)
		// The continue token carries the first page's revision.
		q.Del("resourceVersion")
		q.Del("resourceVersionMatch")
	}
}

// decodePage reads a page of a list, JSON or (pb) protobuf: its
// resourceVersion, continue token and items, each as decode reads it.
func decodePage(data []byte, pb bool) (rv, cont string, items [][]byte, err error) {
	if pb {
		if data, err = unwrapProtobuf(data); err != nil {
			return "", "", nil, err
		}
		return protoList(data)
	}
	var page struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		return "", "", nil, err
	}
	items = make([][]byte, len(page.Items))
	for i, it := range page.Items {
		items[i] = it
	}
	return page.Metadata.ResourceVersion, page.Metadata.Continue, items, nil
}

// streamingRefused is listStreaming's error when the server does not
// stream lists: it answered the request with an error before any event.
type streamingRefused struct{ err error }

func (e *streamingRefused) Error() string {
	return "kube: the server does not stream lists: " + e.err.Error()
}
func (e *streamingRefused) Unwrap() error { return e.err }

// listStreaming lists with a watch that sends every object as ADDED, then
// a bookmark annotated initial-events-end at the snapshot's
// resourceVersion. The events before it are in no order: they are one
// snapshot, published at the bookmark.
func (s *Store[V]) listStreaming(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := s.selectors()
	q.Set("watch", "1")
	q.Set("sendInitialEvents", "true")
	q.Set("allowWatchBookmarks", "true")
	q.Set("resourceVersionMatch", "NotOlderThan")
	q.Set("resourceVersion", "")
	resp, err := s.c.doAccept(ctx, http.MethodGet, s.collectionPath(s.opts.namespace), q, nil, s.accept())
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return nil, 0, &streamingRefused{err}
		}
		return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
	}
	defer resp.Body.Close()
	pb := isProtobuf(resp.Header)
	s.read(pb)
	evs := newEvents(resp)
	var entries []informer.Entry[string, V]
	for first := true; ; first = false {
		typ, obj, err := evs.next()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			return nil, 0, fmt.Errorf("kube: list %s: streaming: %w", s.gvr.Resource, err)
		}
		switch typ {
		case "ADDED":
			e, _, err := s.decode(obj, pb, true)
			if err != nil {
				return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
			}
			entries = append(entries, e)
		case "BOOKMARK":
			m, err := eventMeta(obj, pb)
			if err != nil {
				return nil, 0, fmt.Errorf("kube: list %s: bookmark: %w", s.gvr.Resource, err)
			}
			if m.Annotations[initialEventsEnd] != "true" {
				continue
			}
			rev, err := parseRevision(m.ResourceVersion)
			if err != nil {
				return nil, 0, fmt.Errorf("kube: list %s: %w", s.gvr.Resource, err)
			}
			return entries, rev, nil
		case "ERROR":
			err := fmt.Errorf("kube: list %s: streaming: %w", s.gvr.Resource, watchError(obj, pb))
			if first {
				return nil, 0, &streamingRefused{err}
			}
			return nil, 0, err
		default:
			return nil, 0, fmt.Errorf("kube: list %s: streaming: a %s event before the initial events ended", s.gvr.Resource, typ)
		}
	}
}

// watchError turns a watch's ERROR event (a metav1.Status) into an error:
// 410 Gone (the resourceVersion is too old) matches
// informer.ErrRevisionExpired.
func watchError(obj []byte, pb bool) error {
	var st status
	if pb {
		st, _ = protoStatus(obj)
	} else {
		_ = json.Unmarshal(obj, &st)
	}
	e := &APIError{Method: "WATCH", Code: st.Code, Reason: st.Reason, Message: st.Message}
	// 410: the revision is compacted, or gone from the watch cache; "Too
	// large resource version" (504): beyond what the cache has.
	if st.Code == http.StatusGone || st.Reason == "Expired" || st.Reason == "Gone" ||
		strings.Contains(st.Message, "Too large resource version") {
		return fmt.Errorf("%w: %w", informer.ErrRevisionExpired, e)
	}
	return e
}

// head returns the server's current revision: that of a consistent list
// of at most one object (without the selectors, which could make the
// server read many objects to find one that matches).
func (s *Store[V]) head(ctx context.Context, ns string) (informer.Revision, error) {
	q := url.Values{}
	q.Set("limit", "1")
	data, err := s.c.call(ctx, http.MethodGet, s.collectionPath(ns), q, nil)
	if err != nil {
		return 0, err
	}
	var page struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		return 0, err
	}
	return parseRevision(page.Metadata.ResourceVersion)
}

// Watch emits every change after revision after (of objects the selectors
// match) until ctx is done (it returns ctx.Err()), the watch fails, or emit
// returns an error; with the server's bookmarks (about one a minute) as
// informer.Bookmark. ADDED and MODIFIED are Puts, DELETED a Delete that
// carries the last value, at the deletion's revision. A revision the
// server no longer has (410 Gone) is informer.ErrRevisionExpired. The
// server ends a watch after a while (--min-request-timeout, 30 to 60
// minutes): Watch then returns an error, and the informer watches again
// from the last revision it saw.
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	if err := s.resolve(ctx); err != nil {
		return err
	}
	// A watch from a revision the server has not reached waits for it
	// (served by etcd) or fails after a few seconds (by the watch cache):
	// such a revision is from another server, or from before this one lost
	// its data, and the informer must list again.
	head, err := s.head(ctx, s.opts.namespace)
	if err != nil {
		return fmt.Errorf("kube: watch %s after %d: %w", s.gvr.Resource, after, err)
	}
	if after > head {
		return fmt.Errorf("kube: watch %s after %d: the server is at revision %d: %w",
			s.gvr.Resource, after, head, informer.ErrRevisionExpired)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := s.selectors()
	q.Set("watch", "1")
	q.Set("allowWatchBookmarks", "true")
	q.Set("resourceVersion", formatRevision(after))
	resp, err := s.c.doAccept(ctx, http.MethodGet, s.collectionPath(s.opts.namespace), q, nil, s.accept())
	if err != nil {
		if isCode(err, http.StatusGone) {
			return fmt.Errorf("kube: watch %s after %d: %w: %w", s.gvr.Resource, after, informer.ErrRevisionExpired, err)
		}
		return fmt.Errorf("kube: watch %s after %d: %w", s.gvr.Resource, after, err)
	}
	defer resp.Body.Close()
	pb := isProtobuf(resp.Header)
	s.read(pb)
	evs := newEvents(resp)
	last := after
	for {
		typ, obj, err := evs.next()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("kube: watch %s: the stream ended: %w", s.gvr.Resource, err)
		}
		var ev informer.Event[string, V]
		switch typ {
		case "ADDED", "MODIFIED", "DELETED":
			e, _, err := s.decode(obj, pb, true)
			if err != nil {
				return fmt.Errorf("kube: watch %s: %w", s.gvr.Resource, err)
			}
			ev = informer.Event[string, V]{Type: informer.Put, Key: e.Key, Value: e.Value, Revision: e.Revision, Err: e.Err}
			if typ == "DELETED" {
				ev.Type, ev.Err = informer.Delete, nil
			}
		case "BOOKMARK":
			m, err := eventMeta(obj, pb)
			if err != nil {
				return fmt.Errorf("kube: watch %s: bookmark: %w", s.gvr.Resource, err)
			}
			rev, err := parseRevision(m.ResourceVersion)
			if err != nil {
				return fmt.Errorf("kube: watch %s: bookmark: %w", s.gvr.Resource, err)
			}
			if rev <= last {
				continue
			}
			ev = informer.Event[string, V]{Type: informer.Bookmark, Revision: rev}
		case "ERROR":
			return fmt.Errorf("kube: watch %s after %d: %w", s.gvr.Resource, last, watchError(obj, pb))
		default:
			return fmt.Errorf("kube: watch %s: unknown event type %q", s.gvr.Resource, typ)
		}
		last = max(last, ev.Revision)
		s.seen(ev.Revision, nil)
		if err := emit(ev); err != nil {
			return err
		}
	}
}
