package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/converge-go/converge/informer"
)

// Apply writes v to key's object with server-side apply as fieldManager,
// creating the object if it does not exist, and returns the revision
// written. It is not a compare-and-swap, and not the Store's write path
// (informer's helpers use Update): the server merges v into the object
// field by field, and fieldManager owns every field v's JSON has, so leave
// out with omitempty what the manager does not mean to own. A field another
// manager owns with a different value is a 409, which wraps
// informer.ErrConflict, unless force takes it over. If v has a .status and
// the resource has a status subresource, the status is applied with a
// second PATCH to it, as Update does; the same half-write rule holds.
// metadata.managedFields and resourceVersion in v are left out.
func (s *Store[V]) Apply(ctx context.Context, key string, v V, fieldManager string, force bool) (informer.Revision, error) {
	if fieldManager == "" {
		return 0, errors.New("kube: Apply: empty field manager")
	}
	if err := s.resolve(ctx); err != nil {
		return 0, err
	}
	ns, name, err := s.split(key)
	if err != nil {
		return 0, err
	}
	enc, err := encode(s.opts.codec, v, s.encodeOptions(ns, name, ""))
	if err != nil {
		return 0, err
	}
	body, err := withoutManagedFields(enc.body)
	if err != nil {
		return 0, fmt.Errorf("kube: apply %s: %w", key, err)
	}
	q := url.Values{}
	q.Set("fieldManager", fieldManager)
	q.Set("force", strconv.FormatBool(force))
	data, err := s.c.call(ctx, http.MethodPatch, s.objectPath(ns, name), q, body)
	if err != nil {
		return 0, conflict(err, http.StatusConflict)
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("kube: apply %s: decode the server's answer: %w", key, err)
	}
	rev, err := parseRevision(env.Metadata.ResourceVersion)
	if err != nil || !s.status || enc.status == nil || sameStatus(enc.status, env.Status) {
		return s.seen(rev, err)
	}
	data, err = s.c.call(ctx, http.MethodPatch, s.objectPath(ns, name)+"/status", q, body)
	if err != nil {
		return 0, fmt.Errorf("kube: %s applied at revision %d, but not its status: %w", key, rev, err)
	}
	env = envelope{}
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("kube: apply %s: decode the server's answer: %w", key, err)
	}
	return s.seen(parseRevision(env.Metadata.ResourceVersion))
}

// withoutManagedFields removes metadata.managedFields, which an apply must
// not send.
func withoutManagedFields(body []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(obj["metadata"], &md); err != nil {
		return nil, err
	}
	if _, ok := md["managedFields"]; !ok {
		return body, nil
	}
	delete(md, "managedFields")
	var err error
	if obj["metadata"], err = json.Marshal(md); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}
