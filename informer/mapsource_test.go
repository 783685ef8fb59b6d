package informer_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sourcetest"
)

// Delete removes k, logging a Delete that carries its last value. The
// package example needs no deletes; the conformance test does.
func (s *mapSource) Delete(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[k]
	if !ok {
		return
	}
	delete(s.data, k)
	s.log = append(s.log, informer.Event[string, string]{Type: informer.Delete, Key: k, Value: v, Revision: informer.Revision(len(s.log) + 1)})
	close(s.changed)
	s.changed = make(chan struct{})
}

// The Source the package example and docs/writing-a-source.md show passes the suite a
// backend author is told to run first. It keeps its whole history, so it
// cannot expire revisions on demand.
func TestTheExampleSourcePassesTheConformanceSuite(t *testing.T) {
	sourcetest.Run(t, sourcetest.Suite[string, string]{
		New: func(*testing.T) sourcetest.Backend[string, string] {
			s := &mapSource{data: map[string]string{}, changed: make(chan struct{})}
			return sourcetest.Backend[string, string]{
				Source:            s,
				Put:               func(_ context.Context, k, v string) error { s.Put(k, v); return nil },
				Delete:            func(_ context.Context, k string) error { s.Delete(k); return nil },
				DeletesCarryValue: true,
			}
		},
		Key:   func(i int) string { return "k" + strconv.Itoa(i) },
		Value: func(i int) string { return "v" + strconv.Itoa(i) },
	})
}
