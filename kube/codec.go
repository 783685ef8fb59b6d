package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
)

// objectMeta is the part of an object's metadata the Store reads.
type objectMeta struct {
	Name              string     `json:"name"`
	Namespace         string     `json:"namespace"`
	ResourceVersion   string     `json:"resourceVersion"`
	Generation        int64      `json:"generation"`
	Finalizers        []string   `json:"finalizers"`
	DeletionTimestamp *time.Time `json:"deletionTimestamp"`
	// Annotations are read for the initial-events-end bookmark of a
	// streaming list.
	Annotations map[string]string `json:"annotations"`
}

// envelope is what the Store reads of every object it gets, besides V.
type envelope struct {
	Kind     string          `json:"kind"`
	Metadata objectMeta      `json:"metadata"`
	Status   json.RawMessage `json:"status"`
}

// parseRevision reads a resourceVersion: since Kubernetes 1.35 a decimal
// integer that grows with every write of a resource type (comparable, as
// informer.Revision must be).
func parseRevision(rv string) (informer.Revision, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("kube: resourceVersion %q is not a positive integer", rv)
	}
	return informer.Revision(n), nil
}

func formatRevision(r informer.Revision) string { return strconv.FormatUint(uint64(r), 10) }

// metaOf returns the object.Meta of *p, if V (or *V) is an object.Object.
func metaOf[V any](p *V) *object.Meta {
	if o, ok := any(p).(object.Object); ok {
		return o.ObjectMeta()
	}
	if o, ok := any(*p).(object.Object); ok && !reflect.ValueOf(*p).IsNil() {
		return o.ObjectMeta()
	}
	return nil
}

// metaKeys are the JSON names of object.Meta's fields, which the value's
// JSON carries at its top level when Meta is embedded as the object
// package says; the Store moves them to and from metadata.
var metaKeys = []string{"generation", "finalizers", "deletionRequested"}

// fromServer sets v's object.Meta, if it has one, from the server's
// metadata: generation, finalizers and deletionTimestamp are the server's.
func fromServer[V any](v *V, m *objectMeta) {
	om := metaOf(v)
	if om == nil {
		return
	}
	om.Generation = m.Generation
	om.Finalizers = m.Finalizers
	om.DeletionRequested = time.Time{}
	if m.DeletionTimestamp != nil {
		om.DeletionRequested = m.DeletionTimestamp.UTC()
	}
}

// encodeOptions is what encode writes into the object's metadata.
type encodeOptions struct {
	apiVersion, kind string
	namespace, name  string
	resourceVersion  string // "" for a create
}

// encoded is a value as the API server takes it.
type encoded struct {
	body []byte
	// status is the value's .status, nil if it has none.
	status json.RawMessage
}

// encode turns v into the object the API server takes: the codec's JSON,
// with apiVersion, kind, metadata.name, namespace and resourceVersion set,
// and v's object.Meta, if it has one, moved from the top level into
// metadata (finalizers; generation and deletionTimestamp are the server's
// and are left out). Other metadata (labels, annotations) comes from v's
// own metadata field, if it has one.
func encode[V any](codec informer.Codec[V], v V, o encodeOptions) (encoded, error) {
	data, err := codec.Marshal(v)
	if err != nil {
		return encoded{}, fmt.Errorf("kube: encode %s: %w", o.name, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return encoded{}, fmt.Errorf("kube: encode %s: the value's JSON is not an object: %s", o.name, truncate(data))
	}
	// Raw fields: the metadata is copied, not decoded (a typed value's
	// managedFields are most of it).
	md := map[string]json.RawMessage{}
	if raw, ok := obj["metadata"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &md); err != nil {
			return encoded{}, fmt.Errorf("kube: encode %s: metadata: %w", o.name, err)
		}
		if md == nil {
			md = map[string]json.RawMessage{}
		}
	}
	if om := metaOf(&v); om != nil {
		for _, k := range metaKeys {
			delete(obj, k)
		}
		delete(md, "generation")
		delete(md, "deletionTimestamp")
		if len(om.Finalizers) > 0 {
			md["finalizers"], _ = json.Marshal(om.Finalizers)
		} else {
			delete(md, "finalizers")
		}
	}
	md["name"], _ = json.Marshal(o.name)
	if o.namespace != "" {
		md["namespace"], _ = json.Marshal(o.namespace)
	} else {
		delete(md, "namespace")
	}
	if o.resourceVersion != "" {
		md["resourceVersion"], _ = json.Marshal(o.resourceVersion)
	} else {
		delete(md, "resourceVersion")
	}
	if obj["metadata"], err = json.Marshal(md); err != nil {
		return encoded{}, fmt.Errorf("kube: encode %s: metadata: %w", o.name, err)
	}
	obj["apiVersion"], _ = json.Marshal(o.apiVersion)
	obj["kind"], _ = json.Marshal(o.kind)
	body, err := json.Marshal(obj)
	if err != nil {
		return encoded{}, fmt.Errorf("kube: encode %s: %w", o.name, err)
	}
	return encoded{body: body, status: obj["status"]}, nil
}

// sameStatus reports whether two .status values are the same JSON, an
// absent, null or empty object counting as none.
func sameStatus(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil {
		return false
	}
	if len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(emptyToNil(x), emptyToNil(y))
}

func emptyToNil(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	return v
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
