package httpstore

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// Access is what a bearer token may do.
type Access uint8

const (
	// ReadOnly may list, get and watch.
	ReadOnly Access = iota + 1
	// ReadWrite may also create, update and delete.
	ReadWrite
)

// DefaultMaxBodyBytes is ServerOptions.MaxBodyBytes when it is zero.
const DefaultMaxBodyBytes = 1 << 20

// DefaultBookmarkInterval is ServerOptions.BookmarkInterval when it is zero.
const DefaultBookmarkInterval = 10 * time.Second

// DefaultWatchWriteTimeout is ServerOptions.WatchWriteTimeout when it is
// zero.
const DefaultWatchWriteTimeout = 30 * time.Second

// ServerOptions configure a Server. The zero value serves everyone,
// read-write, with the default limits.
type ServerOptions[V any] struct {
	// Tokens maps each bearer token the server accepts to what it may do.
	// A request without an Authorization: Bearer header, or with a token
	// not in Tokens, gets 401; a ReadOnly token's write gets 403. Nothing
	// is written in either case. Default (nil or empty): no
	// authentication, every request may read and write, for a server only
	// its own machine can reach.
	Tokens map[string]Access
	// MaxBodyBytes bounds a write's body; a larger one gets 413 and is not
	// written. Default: DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// BookmarkInterval is how often an idle watch stream gets a bookmark
	// line, which keeps the connection alive through proxies and tells a
	// client that the server is still there. Default:
	// DefaultBookmarkInterval (10 s).
	BookmarkInterval time.Duration
	// WatchWriteTimeout bounds each write of a watch stream: a client that
	// stops reading (its connection's buffers full) fails the write after
	// this long, and the stream and the store's Watch under it end, rather
	// than holding them forever. Default: DefaultWatchWriteTimeout (30 s).
	WatchWriteTimeout time.Duration
	// Default, if set, returns the value to write in place of the one a
	// Create or Update carries (filling in defaults), before Validate sees
	// it. Default: none.
	Default func(ctx context.Context, key string, v V) V
	// Validate, if set, is called with every value a Create or Update
	// would write, after Default; an error refuses the write with 422 and
	// the error's text, and nothing is written. Default: none.
	Validate func(ctx context.Context, key string, v V) error
	// Select, if set, lets a list or a watch ask for a part of the store,
	// as a Kubernetes field selector does: the request's selector
	// parameter (ClientOptions.Selector), a string whose meaning is the
	// server's, is handed to Select, which returns whether a key and its
	// value are selected, or an error that refuses the request with 400
	// and the error's text. See "Selections" in the package documentation
	// for what a selected list and watch send. Select is called once per
	// request; the function it returns, once per entry and event, from
	// one goroutine. Default: none, and a request with a selector is
	// refused with 400.
	Select func(selector string) (func(key string, v V) bool, error)
	// Clock drives the bookmark ticker. Default: the real clock.
	Clock clock.WithTicker
}

// Server is an http.Handler that serves an informer.Store[string, V] with
// the protocol of the package documentation. Create one with NewServer;
// mount it anywhere (with http.StripPrefix below a path). It is safe for
// concurrent use, and holds no state of its own beyond its options: a
// Server may be replaced by another over the same store (a restart) and
// clients resume their watches after their last revision.
type Server[V any] struct {
	store informer.Store[string, V]
	opts  ServerOptions[V]
}

var _ http.Handler = (*Server[int])(nil)

// NewServer returns a Server for store with opts. It returns an error if
// store is nil, a token is empty or its Access is not ReadOnly or ReadWrite,
// or a limit is negative: configurations that cannot work.
func NewServer[V any](store informer.Store[string, V], opts ServerOptions[V]) (*Server[V], error) {
	if store == nil {
		return nil, errors.New("httpstore.NewServer: nil store")
	}
	for tok, a := range opts.Tokens {
		if tok == "" {
			return nil, errors.New("httpstore.NewServer: ServerOptions.Tokens has an empty token")
		}
		if a != ReadOnly && a != ReadWrite {
			return nil, fmt.Errorf("httpstore.NewServer: ServerOptions.Tokens: token has access %d, want ReadOnly or ReadWrite", a)
		}
	}
	switch {
	case opts.MaxBodyBytes < 0:
		return nil, errors.New("httpstore.NewServer: negative ServerOptions.MaxBodyBytes")
	case opts.MaxBodyBytes == 0:
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case opts.BookmarkInterval < 0:
		return nil, errors.New("httpstore.NewServer: negative ServerOptions.BookmarkInterval")
	case opts.BookmarkInterval == 0:
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	switch {
	case opts.WatchWriteTimeout < 0:
		return nil, errors.New("httpstore.NewServer: negative ServerOptions.WatchWriteTimeout")
	case opts.WatchWriteTimeout == 0:
		opts.WatchWriteTimeout = DefaultWatchWriteTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Server[V]{store: store, opts: opts}, nil
}

// ServeHTTP serves one request of the protocol.
func (s *Server[V]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if !s.authorize(w, r, write) {
		return
	}
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/keys", "keys":
		s.keys(w, r)
	case "/watch", "watch":
		if r.Method != http.MethodGet {
			refuse(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "watch is GET only")
			return
		}
		s.watch(w, r)
	default:
		refuse(w, http.StatusNotFound, codeNotFound, "no such path "+strconv.Quote(r.URL.Path)+": want /keys or /watch")
	}
}

// authorize answers 401 or 403 and returns false unless the request's token
// may do what it asks.
func (s *Server[V]) authorize(w http.ResponseWriter, r *http.Request, write bool) bool {
	if len(s.opts.Tokens) == 0 {
		return true
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="httpstore"`)
		refuse(w, http.StatusUnauthorized, codeUnauthorized, "no bearer token: send Authorization: Bearer TOKEN")
		return false
	}
	var access Access
	// Every token is compared, in constant time, so that the time taken
	// tells nothing about how close a guess was.
	for t, a := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			access = a
		}
	}
	switch {
	case access == 0:
		w.Header().Set("WWW-Authenticate", `Bearer realm="httpstore", error="invalid_token"`)
		refuse(w, http.StatusUnauthorized, codeUnauthorized, "unknown bearer token")
		return false
	case write && access != ReadWrite:
		refuse(w, http.StatusForbidden, codeForbidden, "the token is read-only: "+r.Method+" needs a read-write token")
		return false
	}
	return true
}

// keys serves /keys: list, get and the writes.
func (s *Server[V]) keys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key, hasKey := q.Get("key"), q.Has("key")
	if r.Method == http.MethodGet && !hasKey {
		s.list(w, r)
		return
	}
	if !hasKey {
		refuse(w, http.StatusBadRequest, codeBadRequest, r.Method+" /keys needs a key parameter")
		return
	}
	var rev informer.Revision
	if q.Has("revision") {
		n, err := strconv.ParseUint(q.Get("revision"), 10, 64)
		if err != nil {
			refuse(w, http.StatusBadRequest, codeBadRequest, "revision: "+err.Error())
			return
		}
		rev = informer.Revision(n)
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		s.get(w, r, key)
	case http.MethodPost, http.MethodPut:
		v, ok := s.admit(w, r, key)
		if !ok {
			return
		}
		var (
			wrote informer.Revision
			err   error
		)
		if r.Method == http.MethodPost {
			wrote, err = s.store.Create(ctx, key, v)
		} else {
			if !q.Has("revision") {
				refuse(w, http.StatusBadRequest, codeBadRequest, "PUT /keys (update) needs a revision parameter")
				return
			}
			wrote, err = s.store.Update(ctx, key, v, rev)
		}
		s.wrote(w, wrote, err)
	case http.MethodDelete:
		wrote, err := s.store.Delete(ctx, key, rev)
		s.wrote(w, wrote, err)
	default:
		refuse(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" /keys: want GET, POST, PUT or DELETE")
	}
}

// list answers with the store's List, the selected entries only if the
// request has a selector.
func (s *Server[V]) list(w http.ResponseWriter, r *http.Request) {
	match, ok := s.selector(w, r)
	if !ok {
		return
	}
	entries, rev, err := s.store.List(r.Context())
	if err != nil {
		refuseErr(w, "list", err)
		return
	}
	out := wireList{Revision: uint64(rev), Entries: make([]wireEntry, 0, len(entries))}
	for _, e := range entries {
		if match != nil && !selected(match, e.Key, e.Value, e.Err) {
			continue
		}
		we := wireEntry{Key: e.Key, Revision: uint64(e.Revision)}
		if e.Err != nil {
			we.Error = e.Err.Error()
		} else {
			we.Value, we.Error = marshal(e.Value)
		}
		out.Entries = append(out.Entries, we)
	}
	reply(w, http.StatusOK, out)
}

// selector returns the predicate of the request's selector parameter, nil
// for none. It answers 400 and returns false for a selector the server
// cannot take.
func (s *Server[V]) selector(w http.ResponseWriter, r *http.Request) (func(string, V) bool, bool) {
	q := r.URL.Query()
	if !q.Has(selectorParam) {
		return nil, true
	}
	if s.opts.Select == nil {
		refuse(w, http.StatusBadRequest, codeBadRequest, "this server takes no selector")
		return nil, false
	}
	match, err := s.opts.Select(q.Get(selectorParam))
	if err == nil && match == nil {
		err = errors.New("the server's Select returned no function")
	}
	if err != nil {
		refuse(w, http.StatusBadRequest, codeBadRequest, "selector "+strconv.Quote(q.Get(selectorParam))+": "+err.Error())
		return nil, false
	}
	return match, true
}

// get answers with the store's Get, 404 if key does not exist.
func (s *Server[V]) get(w http.ResponseWriter, r *http.Request, key string) {
	v, rev, ok, err := s.store.Get(r.Context(), key)
	switch {
	case err != nil:
		refuseErr(w, "get "+strconv.Quote(key), err)
	case !ok:
		refuse(w, http.StatusNotFound, codeNotFound, "key "+strconv.Quote(key)+" does not exist")
	default:
		e := wireEntry{Key: key, Revision: uint64(rev)}
		e.Value, e.Error = marshal(v)
		if e.Error != "" {
			refuse(w, http.StatusInternalServerError, codeInternal, "get "+strconv.Quote(key)+": "+e.Error)
			return
		}
		reply(w, http.StatusOK, e)
	}
}

// admit reads the value a write carries, within the size limit, and runs
// the hooks on it. It answers the refusal and returns false if the value
// may not be written.
func (s *Server[V]) admit(w http.ResponseWriter, r *http.Request, key string) (V, bool) {
	var v V
	if r.ContentLength > s.opts.MaxBodyBytes {
		refuse(w, http.StatusRequestEntityTooLarge, codeTooLarge,
			fmt.Sprintf("body of %d bytes is over the limit of %d", r.ContentLength, s.opts.MaxBodyBytes))
		return v, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		refuse(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("body is over the limit of %d bytes", tooLarge.Limit))
		return v, false
	case err != nil:
		refuse(w, http.StatusBadRequest, codeBadRequest, "reading the body: "+err.Error())
		return v, false
	}
	if err := json.Unmarshal(body, &v); err != nil {
		refuse(w, http.StatusBadRequest, codeBadRequest, "the body is not a value of this store: "+err.Error())
		return v, false
	}
	if s.opts.Default != nil {
		v = s.opts.Default(r.Context(), key, v)
	}
	if s.opts.Validate != nil {
		if err := s.opts.Validate(r.Context(), key, v); err != nil {
			refuse(w, http.StatusUnprocessableEntity, codeInvalid, err.Error())
			return v, false
		}
	}
	return v, true
}

// wrote answers a write's outcome.
func (s *Server[V]) wrote(w http.ResponseWriter, rev informer.Revision, err error) {
	if err != nil {
		refuseErr(w, "write", err)
		return
	}
	reply(w, http.StatusOK, wireWrite{Revision: uint64(rev)})
}

// marshal encodes v, or returns why it cannot.
func marshal[V any](v V) (json.RawMessage, string) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "the server cannot encode the value: " + err.Error()
	}
	return b, ""
}

// reply writes body as JSON with status.
func reply(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		refuse(w, http.StatusInternalServerError, codeInternal, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// refuse answers a refused request.
func refuse(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(wireError{Code: code, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// refuseErr answers a store's error with the status it stands for.
func refuseErr(w http.ResponseWriter, op string, err error) {
	status, code := statusOf(err)
	refuse(w, status, code, op+": "+err.Error())
}

// statusOf maps a store's error to the protocol's status and code.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, informer.ErrConflict):
		return http.StatusConflict, codeConflict
	case errors.Is(err, informer.ErrRevisionExpired):
		return http.StatusGone, codeExpired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, codeUnavailable
	}
	return http.StatusInternalServerError, codeInternal
}
