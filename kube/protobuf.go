package kube

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// protobufMediaType is the API server's protobuf encoding of built-in
// types; custom resources have none.
const protobufMediaType = "application/vnd.kubernetes.protobuf"

// acceptProtobuf asks for protobuf and takes JSON where the server has no
// protobuf for the resource (a custom resource), as client-go asks.
const acceptProtobuf = protobufMediaType + ", application/json"

// protobufPrefix starts every protobuf object the server sends: "k8s" and
// a zero byte, then a runtime.Unknown whose raw field is the object.
var protobufPrefix = []byte("k8s\x00")

// ProtoMessage is what WithProtobuf needs of a type T: *T has the
// Unmarshal method that the generated code of k8s.io/api gives every API
// type (corev1.ConfigMap, appsv1.Deployment, ...), which reads the
// object's protobuf (its fields, metadata at field 1, without the
// envelope).
type ProtoMessage[T any] interface {
	*T
	Unmarshal(data []byte) error
}

// WithProtobuf makes List, Watch and Get ask for protobuf, the encoding
// the API server has for built-in resources, and decode each object into
// T with its generated Unmarshal method (P, inferred: *T), instead of
// decoding JSON with the codec: about as client-go's typed clients read.
// It is an explicit choice: the Store never guesses an encoding from T.
// Writes (Create, Update, Delete, Apply) still send and read JSON through
// the codec (WithCodec, default informer.JSON[T]), so T must also
// round-trip through it, as the API structs do. A response the server
// sends as JSON anyway (a custom resource) is decoded by the codec.
// A value read from protobuf has no apiVersion and kind (TypeMeta): the
// server puts them in the envelope, not in the object. For a Store of
// pointers (*corev1.ConfigMap), see WithProtobufPointer. Unmarshal gets
// a part of a whole response, which it should not keep (the generated code
// copies what it keeps): a value that did would hold the page in memory.
// Default: JSON.
func WithProtobuf[T any, P ProtoMessage[T]]() Option[T] {
	return func(o *options[T]) {
		o.protobuf = func(b []byte) (T, error) {
			var v T
			err := P(&v).Unmarshal(b)
			return v, err
		}
	}
}

// WithProtobufPointer is WithProtobuf for a Store whose values are
// pointers, V = *T: each object is decoded into a new T.
func WithProtobufPointer[T any, P ProtoMessage[T]]() Option[*T] {
	return func(o *options[*T]) {
		o.protobuf = func(b []byte) (*T, error) {
			v := new(T)
			if err := P(v).Unmarshal(b); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
}

// isProtobuf reports whether a response's body is protobuf.
func isProtobuf(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == protobufMediaType
}

// unwrapProtobuf returns the object inside the server's envelope: the
// prefix, then a runtime.Unknown (typeMeta = 1, raw = 2).
func unwrapProtobuf(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, protobufPrefix) {
		return nil, fmt.Errorf("kube: a protobuf response without the %q prefix", protobufPrefix[:3])
	}
	var raw []byte
	err := protoFields(b[len(protobufPrefix):], func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if n == 2 {
			raw = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kube: a protobuf envelope: %w", err)
	}
	return raw, nil
}

// protoFields calls f with each field of the message b: for a
// length-delimited field its bytes (not copied), for a varint its value.
func protoFields(b []byte, f func(n protowire.Number, t protowire.Type, bytes []byte, varint uint64) error) error {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var (
			v []byte
			u uint64
		)
		switch t {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			u, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(n, t, b)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if err := f(n, t, v, u); err != nil {
			return err
		}
	}
	return nil
}

// protoList reads a list (ListMeta = 1, items = 2, as every list type of
// the API has them): its resourceVersion, continue token and items.
func protoList(b []byte) (rv, cont string, items [][]byte, err error) {
	err = protoFields(b, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch n {
		case 1:
			return protoFields(v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				switch n {
				case 2:
					rv = string(v)
				case 3:
					cont = string(v)
				}
				return nil
			})
		case 2:
			items = append(items, v)
		}
		return nil
	})
	return rv, cont, items, err
}

// protoMeta reads what the Store needs of an object's metadata (field 1
// of every API type, an ObjectMeta) without decoding the rest of it:
// managedFields, most of a small object, is skipped. With annotations it
// reads those too (a bookmark's).
func protoMeta(obj []byte, annotations bool) (*objectMeta, error) {
	var m objectMeta
	err := protoFields(obj, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if n != 1 {
			return nil
		}
		return protoFields(v, func(n protowire.Number, _ protowire.Type, v []byte, u uint64) error {
			switch n {
			case 1:
				m.Name = string(v)
			case 3:
				m.Namespace = string(v)
			case 6:
				m.ResourceVersion = string(v)
			case 7:
				m.Generation = int64(u)
			case 9:
				var ts metav1.Time
				if err := ts.Unmarshal(v); err != nil {
					return err
				}
				t := ts.Time
				m.DeletionTimestamp = &t
			case 12:
				if annotations {
					var k, val string
					if err := protoFields(v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
						switch n {
						case 1:
							k = string(v)
						case 2:
							val = string(v)
						}
						return nil
					}); err != nil {
						return err
					}
					if m.Annotations == nil {
						m.Annotations = map[string]string{}
					}
					m.Annotations[k] = val
				}
			case 14:
				m.Finalizers = append(m.Finalizers, string(v))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kube: an object's protobuf metadata: %w", err)
	}
	if m.DeletionTimestamp != nil && m.DeletionTimestamp.IsZero() {
		m.DeletionTimestamp = nil
	}
	return &m, nil
}

// protoStatus reads a metav1.Status sent as protobuf (an error response,
// a watch's ERROR event), enveloped or not.
func protoStatus(b []byte) (status, error) {
	if bytes.HasPrefix(b, protobufPrefix) {
		var err error
		if b, err = unwrapProtobuf(b); err != nil {
			return status{}, err
		}
	}
	var st metav1.Status
	if err := st.Unmarshal(b); err != nil {
		return status{}, fmt.Errorf("kube: a protobuf Status: %w", err)
	}
	return status{Kind: "Status", Code: int(st.Code), Reason: string(st.Reason), Message: st.Message}, nil
}

// events reads a watch stream's events: each its type and its object,
// as the stream encodes it.
type events interface {
	next() (typ string, obj []byte, err error)
}

// newEvents returns the reader of a watch response's events, JSON or
// protobuf as its Content-Type says.
func newEvents(resp *http.Response) events {
	if isProtobuf(resp.Header) {
		return &protoEvents{r: bufio.NewReaderSize(resp.Body, 64<<10)}
	}
	return jsonEvents{json.NewDecoder(resp.Body)}
}

type jsonEvents struct{ dec *json.Decoder }

func (e jsonEvents) next() (string, []byte, error) {
	var f frame
	err := e.dec.Decode(&f)
	return f.Type, f.Object, err
}

// maxProtoFrame bounds a watch event: the server's own limit on an object
// is a few MB (etcd's request size); a larger length is a broken stream.
const maxProtoFrame = 256 << 20

// protoEvents reads a protobuf watch stream: frames of a 4-byte
// big-endian length and a metav1.WatchEvent (type = 1, object = 2, a
// RawExtension whose raw = 1 is the enveloped object).
type protoEvents struct {
	r   *bufio.Reader
	hdr [4]byte
}

func (e *protoEvents) next() (string, []byte, error) {
	if _, err := io.ReadFull(e.r, e.hdr[:]); err != nil {
		return "", nil, err
	}
	n := binary.BigEndian.Uint32(e.hdr[:])
	if n > maxProtoFrame {
		return "", nil, fmt.Errorf("kube: a protobuf watch frame of %d bytes", n)
	}
	// A frame of its own: decoded values may keep parts of it.
	b := make([]byte, n)
	if _, err := io.ReadFull(e.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, err
	}
	var typ string
	var obj []byte
	err := protoFields(b, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch n {
		case 1:
			typ = string(v)
		case 2:
			return protoFields(v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if n == 1 {
					obj = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("kube: a protobuf watch event: %w", err)
	}
	if typ != "ERROR" && len(obj) > 0 {
		if obj, err = unwrapProtobuf(obj); err != nil {
			return "", nil, err
		}
	}
	return typ, obj, nil
}
