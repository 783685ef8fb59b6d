package informer

import "encoding/json"

// Codec turns values into the bytes a backend stores (etcdstore, pgstore) and
// back. It must be safe for concurrent use.
type Codec[V any] interface {
	Marshal(v V) ([]byte, error)
	Unmarshal(data []byte) (V, error)
}

// JSON is the default Codec: encoding/json.
type JSON[V any] struct{}

// Marshal encodes v with json.Marshal.
func (JSON[V]) Marshal(v V) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with json.Unmarshal into a zero V.
func (JSON[V]) Unmarshal(data []byte) (V, error) {
	var v V
	err := json.Unmarshal(data, &v)
	return v, err
}
