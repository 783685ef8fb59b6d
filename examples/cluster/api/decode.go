package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Kind names and their API groups, as a manifest's kind and apiVersion say
// them.
const (
	KindDeployment = "Deployment"
	KindReplicaSet = "ReplicaSet"
	KindPod        = "Pod"
	KindNode       = "Node"
	KindLease      = "Lease"
)

// APIVersions maps each kind to its apiVersion.
var APIVersions = map[string]string{
	KindDeployment: "apps/v1",
	KindReplicaSet: "apps/v1",
	KindPod:        "v1",
	KindNode:       "v1",
	KindLease:      "coordination.k8s.io/v1",
}

// Document is one object of a manifest.
type Document struct {
	Kind string
	// Object is a *Deployment, *ReplicaSet, *Pod, *Node or *Lease.
	Object any
	// Line is where the document starts in the manifest, from 1.
	Line int
}

// Meta returns the document's object's metadata.
func (d Document) Meta() *ObjectMeta { return MetaOf(d.Object) }

// MetaOf returns the metadata of a *Deployment, *ReplicaSet, *Pod, *Node
// or *Lease, nil for anything else.
func MetaOf(obj any) *ObjectMeta {
	switch o := obj.(type) {
	case *Deployment:
		return &o.Metadata
	case *ReplicaSet:
		return &o.Metadata
	case *Pod:
		return &o.Metadata
	case *Node:
		return &o.Metadata
	case *Lease:
		return &o.Metadata
	}
	return nil
}

// newObject returns a new object of kind.
func newObject(kind string) any {
	switch kind {
	case KindDeployment:
		return &Deployment{}
	case KindReplicaSet:
		return &ReplicaSet{}
	case KindPod:
		return &Pod{}
	case KindNode:
		return &Node{}
	case KindLease:
		return &Lease{}
	}
	return nil
}

// Decode reads a manifest: one or more YAML documents separated by "---"
// (JSON is YAML too), each with apiVersion and kind. It is strict, as
// kubectl's server-side field validation is: a syntax error, a missing or
// unknown kind, an apiVersion that is not the kind's, an unknown field or a
// value of the wrong type fails the whole manifest with the line it is on,
// so that nothing of a bad manifest is applied. Empty documents are skipped.
func Decode(data []byte) ([]Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("error parsing YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(root.Content) == 0 {
			continue
		}
		n := root.Content[0]
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			continue
		}
		d, err := decodeDocument(n)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
}

func decodeDocument(n *yaml.Node) (Document, error) {
	if n.Kind != yaml.MappingNode {
		return Document{}, fmt.Errorf("line %d: a manifest document must be a mapping with apiVersion and kind", n.Line)
	}
	var kind, version string
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "kind":
			kind = n.Content[i+1].Value
		case "apiVersion":
			version = n.Content[i+1].Value
		}
	}
	if kind == "" {
		return Document{}, fmt.Errorf("line %d: Object 'Kind' is missing", n.Line)
	}
	obj := newObject(kind)
	if obj == nil {
		return Document{}, fmt.Errorf("line %d: no matches for kind %q in version %q (known kinds: Deployment, ReplicaSet, Pod, Node, Lease)", n.Line, kind, version)
	}
	if want := APIVersions[kind]; version != want {
		return Document{}, fmt.Errorf("line %d: no matches for kind %q in version %q (want apiVersion %q)", n.Line, kind, version, want)
	}
	v, err := toJSONValue(n, reflect.TypeOf(obj).Elem(), "", true)
	if err != nil {
		return Document{}, fmt.Errorf("%w (in %s)", err, kind)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Document{}, fmt.Errorf("line %d: %s: %w", n.Line, kind, err)
	}
	if err := json.Unmarshal(b, obj); err != nil {
		return Document{}, fmt.Errorf("line %d: %s: %w", n.Line, kind, err)
	}
	return Document{Kind: kind, Object: obj, Line: n.Line}, nil
}

var timeType = reflect.TypeFor[time.Time]()

// toJSONValue converts n to what encoding/json will decode into a value of
// type t, refusing fields t does not have. A scalar meant for a string
// field is kept as written ("1" for maxSurge: 1, "2" for cpu: 2), as
// Kubernetes' int-or-string and quantity fields accept.
func toJSONValue(n *yaml.Node, t reflect.Type, path string, top bool) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	bad := func(want string) error {
		return fmt.Errorf("line %d: %s: want %s, got %s", n.Line, fieldName(path), want, describeNode(n))
	}
	switch {
	case t == timeType:
		if n.Kind != yaml.ScalarNode {
			return nil, bad("a time")
		}
		return n.Value, nil
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil, bad("a mapping")
		}
		fields := jsonFields(t)
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if top && (k == "kind" || k == "apiVersion") {
				continue
			}
			ft, ok := fields[k]
			if !ok {
				return nil, fmt.Errorf("line %d: unknown field %q", n.Content[i].Line, join(path, k))
			}
			v, err := toJSONValue(n.Content[i+1], ft, join(path, k), false)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil, bad("a mapping")
		}
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			v, err := toJSONValue(n.Content[i+1], t.Elem(), join(path, k), false)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil, bad("a list")
		}
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := toJSONValue(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), false)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, bad("a " + t.Kind().String())
	}
	switch t.Kind() {
	case reflect.String:
		return n.Value, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if err != nil || n.Tag == "!!str" {
			return nil, bad("a boolean")
		}
		return b, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 10, t.Bits())
		if err != nil || n.Tag == "!!str" {
			return nil, bad("an integer")
		}
		return i, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, err := strconv.ParseUint(n.Value, 10, t.Bits())
		if err != nil || n.Tag == "!!str" {
			return nil, bad("a non-negative integer")
		}
		return i, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, t.Bits())
		if err != nil || n.Tag == "!!str" {
			return nil, bad("a number")
		}
		return f, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("line %d: %s: %w", n.Line, fieldName(path), err)
	}
	return v, nil
}

// jsonFields maps the JSON names of t's fields to their types, with the
// fields of untagged embedded structs inlined, as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func fieldName(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}
