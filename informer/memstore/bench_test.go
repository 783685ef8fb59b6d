package memstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

const benchKeys = 100_000

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return keys
}

// Put over 100k keys, with the default history full after the first pass.
func BenchmarkPut(b *testing.B) {
	keys := benchKeyNames()
	s := must.Do(memstore.New[string, int]())
	i := 0
	for b.Loop() {
		s.Put(keys[i%benchKeys], i)
		i++
	}
}

func BenchmarkList100kKeys(b *testing.B) {
	keys := benchKeyNames()
	s := must.Do(memstore.New[string, int]())
	for i, k := range keys {
		s.Put(k, i)
	}
	ctx := context.Background()
	for b.Loop() {
		entries, _, err := s.List(ctx)
		if err != nil || len(entries) != benchKeys {
			b.Fatal(len(entries), err)
		}
	}
}
