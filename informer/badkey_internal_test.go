package informer

import (
	"github.com/converge-go/converge/internal/must"
	"log/slog"
	"strconv"
	"testing"
)

// BenchmarkApplyPut is the cost of one good watch event on the informer's
// side (cache, revision, bad-key bookkeeping), with no handler: what every
// change pays whether or not a key is ever bad.
func BenchmarkApplyPut(b *testing.B) {
	const keys = 1024
	inf := must.Do(New[string, int]("bench", noSource{}, WithLogger(slog.New(slog.DiscardHandler))))
	names := make([]string, keys)
	entries := make([]Entry[string, int], keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
		entries[i] = Entry[string, int]{Key: names[i], Value: i}
	}
	inf.replace(entries, 1)
	w := watchRun[string, int]{after: 1}
	evs := make([]Event[string, int], 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		evs[0] = Event[string, int]{Type: Put, Key: names[i%keys], Value: i, Revision: Revision(i + 2)}
		inf.applyAll(evs, &w)
	}
}
