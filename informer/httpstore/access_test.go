package httpstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// guarded is a server of items with a read-only and a read-write token, a
// 64-byte body limit, a default for S and a validation of N.
func guardedOptions() httpstore.ServerOptions[item] {
	return httpstore.ServerOptions[item]{
		Tokens:       map[string]httpstore.Access{"ro-token": httpstore.ReadOnly, "rw-token": httpstore.ReadWrite},
		MaxBodyBytes: 64,
		Default: func(_ context.Context, _ string, v item) item {
			if v.S == "" {
				v.S = "defaulted"
			}
			return v
		},
		Validate: func(_ context.Context, key string, v item) error {
			if v.N < 0 {
				return errors.New("n must not be negative, got " + key)
			}
			return nil
		},
	}
}

func TestRequestsShouldBeRefusedWithTheirStatusAndWriteNothing(t *testing.T) {
	type op func(ctx context.Context, c *httpstore.Client[item], rev informer.Revision) error
	var (
		list op = func(ctx context.Context, c *httpstore.Client[item], _ informer.Revision) error {
			_, _, err := c.List(ctx)
			return err
		}
		get op = func(ctx context.Context, c *httpstore.Client[item], _ informer.Revision) error {
			_, _, _, err := c.Get(ctx, "a")
			return err
		}
		create = func(v item) op {
			return func(ctx context.Context, c *httpstore.Client[item], _ informer.Revision) error {
				_, err := c.Create(ctx, "b", v)
				return err
			}
		}
		update = func(v item) op {
			return func(ctx context.Context, c *httpstore.Client[item], rev informer.Revision) error {
				_, err := c.Update(ctx, "a", v, rev)
				return err
			}
		}
		del op = func(ctx context.Context, c *httpstore.Client[item], rev informer.Revision) error {
			_, err := c.Delete(ctx, "a", rev)
			return err
		}
	)
	tests := []struct {
		name     string
		token    string
		op       op
		want     error // nil: the request succeeds
		status   int
		contains string
	}{
		{"no token lists", "", list, httpstore.ErrUnauthorized, 401, "no bearer token"},
		{"an unknown token gets", "guess", get, httpstore.ErrUnauthorized, 401, "unknown bearer token"},
		{"an unknown token creates", "guess", create(item{N: 1}), httpstore.ErrUnauthorized, 401, "unknown bearer token"},
		{"a read-only token lists", "ro-token", list, nil, 0, ""},
		{"a read-only token gets", "ro-token", get, nil, 0, ""},
		{"a read-only token creates", "ro-token", create(item{N: 1}), httpstore.ErrForbidden, 403, "read-only"},
		{"a read-only token updates", "ro-token", update(item{N: 2}), httpstore.ErrForbidden, 403, "read-only"},
		{"a read-only token deletes", "ro-token", del, httpstore.ErrForbidden, 403, "read-only"},
		{"a read-write token creates", "rw-token", create(item{N: 1}), nil, 0, ""},
		{"a read-write token updates", "rw-token", update(item{N: 2}), nil, 0, ""},
		{"a read-write token deletes", "rw-token", del, nil, 0, ""},
		{"a body over the limit", "rw-token", create(item{N: 1, S: strings.Repeat("x", 64)}), httpstore.ErrTooLarge, 413, "over the limit of 64"},
		{"an update over the limit", "rw-token", update(item{N: 1, S: strings.Repeat("x", 64)}), httpstore.ErrTooLarge, 413, "over the limit of 64"},
		{"a create the validation refuses", "rw-token", create(item{N: -1}), httpstore.ErrInvalid, 422, "n must not be negative, got b"},
		{"an update the validation refuses", "rw-token", update(item{N: -1}), httpstore.ErrInvalid, 422, "n must not be negative, got a"},
		{"a stale update", "rw-token", func(ctx context.Context, c *httpstore.Client[item], rev informer.Revision) error {
			_, err := c.Update(ctx, "a", item{N: 2}, rev-1)
			return err
		}, informer.ErrConflict, 409, "key is at revision"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := must.Do(memstore.New[string, item]())
			rev := m.Put("a", item{N: 1, S: "x"})
			c, _ := serve[item](t, m, guardedOptions(), tc.token)

			err := tc.op(t.Context(), c, rev)

			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var e *httpstore.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.status, e.StatusCode)
			assert.Contains(t, e.Error(), tc.contains)
			assert.Equal(t, rev, m.Revision(), "a refused request wrote nothing")
			v, _, _, _ := m.Get(t.Context(), "a")
			assert.Equal(t, item{N: 1, S: "x"}, v)
		})
	}
}

func TestDefaultShouldFillTheValueBeforeItIsValidatedAndWritten(t *testing.T) {
	m := must.Do(memstore.New[string, item]())
	opts := guardedOptions()
	validate := opts.Validate
	var validated item
	opts.Validate = func(ctx context.Context, key string, v item) error { validated = v; return validate(ctx, key, v) }
	c, _ := serve[item](t, m, opts, "rw-token")

	rev, err := c.Create(t.Context(), "b", item{N: 3})

	require.NoError(t, err)
	assert.Equal(t, item{N: 3, S: "defaulted"}, validated)
	v, got, ok, err := c.Get(t.Context(), "b")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, item{N: 3, S: "defaulted"}, v)
	assert.Equal(t, rev, got)
}

// Requests only another client than Client sends: the status and code of
// each, and that nothing was written.
func TestMalformedRequestsShouldGetTheirStatusAndWriteNothing(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		chunked                  bool
		status                   int
		code                     string
	}{
		{"not JSON", "POST", "/keys?key=b", "{", false, 400, "BadRequest"},
		{"not an item", "POST", "/keys?key=b", `"text"`, false, 400, "BadRequest"},
		{"a write without a key", "POST", "/keys", `{"n":1}`, false, 400, "BadRequest"},
		{"an update without a revision", "PUT", "/keys?key=a", `{"n":1}`, false, 400, "BadRequest"},
		{"a bad revision", "DELETE", "/keys?key=a&revision=x", "", false, 400, "BadRequest"},
		{"a chunked body over the limit", "POST", "/keys?key=b", `{"n":1,"s":"` + strings.Repeat("x", 80) + `"}`, true, 413, "TooLarge"},
		{"an unknown path", "GET", "/other", "", false, 404, "NotFound"},
		{"a write to watch", "POST", "/watch", "", false, 405, "MethodNotAllowed"},
		{"an unknown method", "PATCH", "/keys?key=a", "{}", false, 405, "MethodNotAllowed"},
		{"a bad after", "GET", "/watch?after=-1", "", false, 400, "BadRequest"},
		{"an expired revision", "GET", "/watch?after=99", "", false, 410, "Expired"},
		{"an absent key", "GET", "/keys?key=zz", "", false, 404, "NotFound"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := must.Do(memstore.New[string, item]())
			rev := m.Put("a", item{N: 1})
			_, srv := serve[item](t, m, guardedOptions(), "rw-token")
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: the request is chunked
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+tc.path, body)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer rw-token")

			resp, err := newHTTPClient(t).Do(req)

			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.status, resp.StatusCode, string(b))
			assert.Contains(t, string(b), `"code":"`+tc.code+`"`)
			assert.Equal(t, rev, m.Revision(), "nothing was written")
		})
	}
}

func TestNewServerShouldReturnAnErrorForAConfigurationThatCannotWork(t *testing.T) {
	store := must.Do(memstore.New[string, item]())
	for want, opts := range map[string]httpstore.ServerOptions[item]{
		"httpstore.NewServer: ServerOptions.Tokens has an empty token":                              {Tokens: map[string]httpstore.Access{"": httpstore.ReadOnly}},
		"httpstore.NewServer: ServerOptions.Tokens: token has access 7, want ReadOnly or ReadWrite": {Tokens: map[string]httpstore.Access{"t": 7}},
		"httpstore.NewServer: negative ServerOptions.MaxBodyBytes":                                  {MaxBodyBytes: -1},
		"httpstore.NewServer: negative ServerOptions.BookmarkInterval":                              {BookmarkInterval: -1},
		"httpstore.NewServer: negative ServerOptions.WatchWriteTimeout":                             {WatchWriteTimeout: -1},
	} {
		srv, err := httpstore.NewServer(store, opts)
		assert.EqualError(t, err, want)
		assert.Nil(t, srv)
	}
	_, err := httpstore.NewServer[item](nil, httpstore.ServerOptions[item]{})
	assert.EqualError(t, err, "httpstore.NewServer: nil store")
	assert.Zero(t, store.Revision(), "a refused server wrote to its store")
}
