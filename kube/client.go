package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// APIError is the API server's answer to a request that failed: its HTTP
// status code and the reason and message of the metav1.Status it sent.
// The Store's methods wrap it, also where they add informer.ErrConflict or
// informer.ErrRevisionExpired; match it with errors.As.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // metav1.StatusReason: "Conflict", "AlreadyExists", "Expired", ...
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("kube: %s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// status is the part of metav1.Status the Store reads, in an error
// response or a watch's ERROR event.
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// client sends the Store's requests: plain HTTP with JSON bodies (and
// protobuf answers to a Store's reads, WithProtobuf) over the transport
// (TLS, credentials) that client-go builds from a rest.Config.
// It has no client-side rate limit, as controller-runtime's default; the
// server's priority and fairness is the limit.
type client struct {
	http *http.Client
	base *url.URL // scheme and host, no path

	mu sync.Mutex
	// discovery caches each group version's resources.
	discovery map[schema.GroupVersion]map[string]apiResource
}

func newClient(cfg *rest.Config) (*client, error) {
	if cfg == nil {
		return nil, errors.New("kube: nil rest.Config")
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: HTTP client from rest.Config: %w", err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: server URL from rest.Config: %w", err)
	}
	base = &url.URL{Scheme: base.Scheme, Host: base.Host, Path: strings.TrimSuffix(base.Path, "/")}
	return &client{http: hc, base: base, discovery: map[schema.GroupVersion]map[string]apiResource{}}, nil
}

// groupVersionPath is the path of a group version: /api/v1 for the core
// group, /apis/GROUP/VERSION for the others.
func groupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// applyPatch is the content type of a server-side apply.
const applyPatch = "application/apply-patch+yaml"

// do sends a request with body (nil: none) and returns the response, whose
// body the caller closes. A status of 300 or above is an *APIError, with
// the body read and closed. A body is JSON unless the method is PATCH,
// which is a server-side apply (JSON is YAML).
func (c *client) do(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	return c.doAccept(ctx, method, path, query, body, "application/json")
}

// doAccept is do with the Accept header given: a response may then be
// protobuf, an error's Status included.
func (c *client) doAccept(ctx context.Context, method, path string, query url.Values, body []byte, accept string) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", accept)
	switch {
	case body != nil && method == http.MethodPatch:
		req.Header.Set("Content-Type", applyPatch)
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("kube: %s %s: %w", method, path, ctxErr)
		}
		return nil, fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{Method: method, Path: path, Code: resp.StatusCode}
	var st status
	if isProtobuf(resp.Header) {
		st, _ = protoStatus(data)
	} else {
		_ = json.Unmarshal(data, &st)
	}
	if st.Kind == "Status" {
		e.Reason, e.Message = st.Reason, st.Message
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	return nil, e
}

// call sends a request and returns the whole response body.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	data, _, err := c.callCode(ctx, method, path, query, body)
	return data, err
}

// callCode is call that also returns the HTTP status code of a success.
func (c *client) callCode(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, int, error) {
	resp, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return nil, 0, err
	}
	data, err := readBody(ctx, method, path, resp)
	if err != nil {
		return nil, 0, err
	}
	return data, resp.StatusCode, nil
}

// get sends a GET with the Accept header given and returns the whole
// response body and whether it is protobuf.
func (c *client) get(ctx context.Context, path string, query url.Values, accept string) ([]byte, bool, error) {
	resp, err := c.doAccept(ctx, http.MethodGet, path, query, nil, accept)
	if err != nil {
		return nil, false, err
	}
	data, err := readBody(ctx, http.MethodGet, path, resp)
	return data, err == nil && isProtobuf(resp.Header), err
}

// readBody reads and closes a response's body.
func readBody(ctx context.Context, method, path string, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("kube: %s %s: %w", method, path, ctxErr)
		}
		return nil, fmt.Errorf("kube: %s %s: read the response: %w", method, path, err)
	}
	return data, nil
}

// apiResource is the part of a discovery document's resource the Store
// needs.
type apiResource struct {
	Name       string `json:"name"`
	Namespaced bool   `json:"namespaced"`
	Kind       string `json:"kind"`
}

// resource returns the discovery entry of gvr and whether it has a status
// subresource, asking the server once per group version.
func (c *client) resource(ctx context.Context, gvr schema.GroupVersionResource) (apiResource, bool, error) {
	gv := gvr.GroupVersion()
	c.mu.Lock()
	res, ok := c.discovery[gv]
	c.mu.Unlock()
	if !ok {
		data, err := c.call(ctx, http.MethodGet, groupVersionPath(gv), nil, nil)
		if err != nil {
			return apiResource{}, false, fmt.Errorf("kube: discover %s: %w", gv, err)
		}
		var list struct {
			Resources []apiResource `json:"resources"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return apiResource{}, false, fmt.Errorf("kube: discover %s: %w", gv, err)
		}
		res = make(map[string]apiResource, len(list.Resources))
		for _, r := range list.Resources {
			res[r.Name] = r
		}
		c.mu.Lock()
		c.discovery[gv] = res
		c.mu.Unlock()
	}
	r, ok := res[gvr.Resource]
	if !ok {
		// Ask again next time: a CustomResourceDefinition may be
		// established by then.
		c.mu.Lock()
		delete(c.discovery, gv)
		c.mu.Unlock()
		return apiResource{}, false, fmt.Errorf("kube: the server has no resource %q in %s", gvr.Resource, gv)
	}
	_, hasStatus := res[gvr.Resource+"/status"]
	return r, hasStatus, nil
}
