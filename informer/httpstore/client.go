package httpstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/converge-go/converge/informer"
)

// ClientOptions configure a Client. The zero value uses
// http.DefaultClient and no token.
type ClientOptions struct {
	// Token is the bearer token sent with every request. Default: none,
	// for a server without authentication.
	Token string
	// HTTPClient sends the requests. Its Timeout, if set, also bounds
	// every watch, which then ends with an error that the informer
	// retries: leave it 0 and bound calls with their contexts. Default:
	// http.DefaultClient.
	HTTPClient *http.Client
	// IdleTimeout ends a watch that has received no line, event or
	// bookmark, for this long, with an error after which the informer
	// watches again from its last revision: what finds a server that
	// went away without closing the connection (a machine that lost
	// power). Keep it well above the server's BookmarkInterval. Default
	// (0): DefaultIdleTimeout, six of the server's default bookmark
	// intervals; negative: none.
	IdleTimeout time.Duration
	// Selector, if set, is sent with List and Watch, which then see only
	// the part of the store it selects, by the rules of the server's
	// ServerOptions.Select (a server without one refuses it with 400): a
	// node agent's "spec.nodeName=n1", say. Get and the writes see every
	// key. See "Selections" in the package documentation. Default: none,
	// the whole store.
	Selector string
}

// DefaultIdleTimeout is ClientOptions.IdleTimeout when it is zero.
const DefaultIdleTimeout = time.Minute

// Client is an informer.Store[string, V] served by a Server in another
// process (or this one): List, Watch, Get and the compare-and-swap writes
// are requests to the server, with the contract of informer.Store. Every
// method is safe for concurrent use and honours its context: a cancelled
// Watch closes its response and returns. A refused request returns an
// *Error (see Error for what it matches). Values travel as JSON, so V must
// survive encoding/json's round trip.
type Client[V any] struct {
	base  *url.URL
	token string
	http  *http.Client
	idle  time.Duration
	// selector is ClientOptions.Selector, as a query: nil for none.
	selector url.Values
}

var _ informer.Store[string, int] = (*Client[int])(nil)

// NewClient returns a Client of the Server at baseURL (http or https, with
// the path the server is mounted at, if any). It fails with a clear error
// for a URL that is not absolute http(s) with a host, and for a token that
// cannot go in a header. It does not contact the server.
func NewClient[V any](baseURL string, opts ClientOptions) (*Client[V], error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("httpstore: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("httpstore: base URL %q: scheme %q, want http or https", baseURL, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("httpstore: base URL %q has no host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("httpstore: base URL %q: want no query or fragment", baseURL)
	}
	if strings.ContainsAny(opts.Token, "\r\n\x00 \t") {
		return nil, errors.New("httpstore: the token has a space or a control character, which a bearer token cannot have")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	idle := opts.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	c := &Client[V]{base: u, token: opts.Token, http: hc, idle: idle}
	if opts.Selector != "" {
		c.selector = url.Values{selectorParam: {opts.Selector}}
	}
	return c, nil
}

// URL returns the base URL the client was made with, without a trailing
// slash.
func (c *Client[V]) URL() string { return c.base.String() }

// endpoint returns the URL of path (keys or watch) with query q.
func (c *Client[V]) endpoint(path string, q url.Values) string {
	u := *c.base
	u.Path += "/" + path
	u.RawQuery = q.Encode()
	return u.String()
}

// do sends a request and returns the response if its status is want, else
// closes it and returns an *Error for op. ctx done before the call fails it
// with ctx's error, having sent nothing.
func (c *Client[V]) do(ctx context.Context, op, method, path string, q url.Values, body []byte, want int) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("httpstore: %s: %w", op, err)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(path, q), rd)
	if err != nil {
		return nil, fmt.Errorf("httpstore: %s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("httpstore: %s: %w", op, err)
	}
	if resp.StatusCode == want {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, responseError(op, req.URL.String(), resp)
}

// responseError reads a refusal into an *Error.
func responseError(op, u string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Op: op, URL: u, StatusCode: resp.StatusCode}
	var we wireError
	if json.Unmarshal(b, &we) == nil && we.Code != "" {
		e.Code, e.Message = we.Code, we.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
		if e.Message == "" {
			e.Message = "(empty body)"
		}
	}
	e.sentinel = sentinelOf(e.Code)
	return e
}

// sentinelOf returns the error a code stands for, nil for none.
func sentinelOf(code string) error {
	switch code {
	case codeConflict:
		return informer.ErrConflict
	case codeExpired:
		return informer.ErrRevisionExpired
	case codeUnauthorized:
		return ErrUnauthorized
	case codeForbidden:
		return ErrForbidden
	case codeInvalid:
		return ErrInvalid
	case codeTooLarge:
		return ErrTooLarge
	}
	return nil
}

// decodeBody decodes resp's JSON body into out and closes it.
func decodeBody(op string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("httpstore: %s: reading the response: %w", op, err)
	}
	return nil
}

// List returns every entry (every selected one, with
// ClientOptions.Selector) and the revision they were read at, one snapshot
// of the server's store. An entry whose value the store, or this
// client, could not decode has Err set and no Value.
func (c *Client[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	resp, err := c.do(ctx, "list", http.MethodGet, "keys", c.selector, nil, http.StatusOK)
	if err != nil {
		return nil, 0, err
	}
	var l wireList
	if err := decodeBody("list", resp, &l); err != nil {
		return nil, 0, err
	}
	out := make([]informer.Entry[string, V], len(l.Entries))
	for i, e := range l.Entries {
		out[i] = informer.Entry[string, V]{Key: e.Key, Revision: informer.Revision(e.Revision)}
		out[i].Value, out[i].Err = decodeValue[V](e.Key, e.Value, e.Error)
	}
	return out, informer.Revision(l.Revision), nil
}

// decodeValue decodes a value sent for key, or returns the error that it
// is bad: the store's (msg), or this client's.
func decodeValue[V any](key string, raw json.RawMessage, msg string) (V, error) {
	var v V
	if msg != "" {
		return v, fmt.Errorf("httpstore: the server's store cannot take the value of %q: %s", key, msg)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero V
		return zero, fmt.Errorf("httpstore: the value of %q does not decode into %T: %w", key, v, err)
	}
	return v, nil
}

// Get returns key's value and mod revision, or ok false and a nil error if
// key does not exist.
func (c *Client[V]) Get(ctx context.Context, key string) (v V, rev informer.Revision, ok bool, err error) {
	op := "get " + strconv.Quote(key)
	resp, err := c.do(ctx, op, http.MethodGet, "keys", url.Values{"key": {key}}, nil, http.StatusOK)
	var e *Error
	if errors.As(err, &e) && e.Code == codeNotFound && e.StatusCode == http.StatusNotFound {
		return v, 0, false, nil
	}
	if err != nil {
		return v, 0, false, err
	}
	var we wireEntry
	if err := decodeBody(op, resp, &we); err != nil {
		return v, 0, false, err
	}
	v, err = decodeValue[V](key, we.Value, we.Error)
	if err != nil {
		return v, 0, false, fmt.Errorf("httpstore: %s: %w", op, err)
	}
	return v, informer.Revision(we.Revision), true, nil
}

// Create sets key to v only if key does not exist, and returns the write's
// revision; a conflict matches informer.ErrConflict.
func (c *Client[V]) Create(ctx context.Context, key string, v V) (informer.Revision, error) {
	return c.write(ctx, "create "+strconv.Quote(key), http.MethodPost, url.Values{"key": {key}}, v)
}

// Update sets key to v only if its mod revision is still rev, and returns
// the write's revision; a conflict matches informer.ErrConflict.
func (c *Client[V]) Update(ctx context.Context, key string, v V, rev informer.Revision) (informer.Revision, error) {
	q := url.Values{"key": {key}, "revision": {strconv.FormatUint(uint64(rev), 10)}}
	return c.write(ctx, fmt.Sprintf("update %q at %d", key, rev), http.MethodPut, q, v)
}

// Delete removes key: at any revision with rev 0 (0 and a nil error if it
// did not exist), else only at rev; a conflict matches informer.ErrConflict.
func (c *Client[V]) Delete(ctx context.Context, key string, rev informer.Revision) (informer.Revision, error) {
	q := url.Values{"key": {key}}
	if rev != 0 {
		q.Set("revision", strconv.FormatUint(uint64(rev), 10))
	}
	op := fmt.Sprintf("delete %q at %d", key, rev)
	resp, err := c.do(ctx, op, http.MethodDelete, "keys", q, nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	var w wireWrite
	if err := decodeBody(op, resp, &w); err != nil {
		return 0, err
	}
	return informer.Revision(w.Revision), nil
}

// write sends a create or an update of v.
func (c *Client[V]) write(ctx context.Context, op, method string, q url.Values, v V) (informer.Revision, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("httpstore: %s: encoding the value: %w", op, err)
	}
	resp, err := c.do(ctx, op, method, "keys", q, body, http.StatusOK)
	if err != nil {
		return 0, err
	}
	var w wireWrite
	if err := decodeBody(op, resp, &w); err != nil {
		return 0, err
	}
	return informer.Revision(w.Revision), nil
}
