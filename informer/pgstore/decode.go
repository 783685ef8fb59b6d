package pgstore

import (
	"github.com/converge-go/converge/informer"
)

// decode decodes the value of key written at rev, or returns a
// *DecodeError and the zero V.
func (s *Store[V]) decode(key string, rev int64, data []byte) (V, error) {
	v, err := s.opts.codec.Unmarshal(data)
	if err != nil {
		var zero V
		return zero, &DecodeError{Collection: s.coll, Key: key, Revision: informer.Revision(rev), Err: err}
	}
	return v, nil
}

// decodeRev is decode for a List's decoders.
func (s *Store[V]) decodeRev(key string, rev informer.Revision, data []byte) (V, error) {
	return s.decode(key, int64(rev), data)
}
