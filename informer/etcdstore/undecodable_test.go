package etcdstore_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/internal/must"
)

// badEvents splits events into the events without their Err and the
// DecodeErrors of the ones that had one (nil for the others), dropping
// bookmarks, failing t on an Err that is not a *DecodeError.
func badEvents(t *testing.T, events []informer.Event[string, item]) ([]informer.Event[string, item], []*etcdstore.DecodeError) {
	t.Helper()
	var out []informer.Event[string, item]
	var errs []*etcdstore.DecodeError
	for _, e := range events {
		if e.Type == informer.Bookmark {
			continue
		}
		var decodeErr *etcdstore.DecodeError
		if e.Err != nil {
			require.ErrorAs(t, e.Err, &decodeErr, "event %+v", e)
			e.Err = nil
		}
		out = append(out, e)
		errs = append(errs, decodeErr)
	}
	return out, errs
}

// handledKeys records the keys a Store passes to its decode-error
// handler.
type handledKeys struct {
	mu   sync.Mutex
	keys []string
}

func (h *handledKeys) option() etcdstore.Option[item] {
	return etcdstore.WithDecodeErrorHandler[item](func(key string, _ error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.keys = append(h.keys, key)
	})
}

func (h *handledKeys) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.keys)
}

// endedOr reports whether r's watch has returned, or else cond.
func (r *recorder) endedOr(cond func() bool) bool {
	select {
	case err := <-r.done:
		r.done <- err
		return true
	default:
		return cond()
	}
}

func TestListShouldReturnAnUndecodableValueAsAnEntryWithADecodeErrorNamingTheKeyAndRevision(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	handled := &handledKeys{}
	src := must.Do(etcdstore.New(cli, prefix, handled.option()))
	good, err := (&rawWriter{cli, prefix}).Put(ctx, "good", item{N: 1})
	require.NoError(t, err)
	resp, err := cli.Put(ctx, prefix+"bad", "not json")
	require.NoError(t, err)
	bad := informer.Revision(resp.Header.Revision)

	entries, rev, err := src.List(ctx)
	require.NoError(t, err, "one bad value must not fail the list of every key")
	assert.GreaterOrEqual(t, rev, bad, "the revision of the read, which other prefixes move too")
	require.Len(t, entries, 2)
	var decodeErr *etcdstore.DecodeError
	require.ErrorAs(t, entries[0].Err, &decodeErr)
	assert.Equal(t, etcdstore.DecodeError{Prefix: prefix, Key: "bad", Revision: bad, Err: decodeErr.Err}, *decodeErr)
	var syntaxErr *json.SyntaxError
	assert.ErrorAs(t, entries[0].Err, &syntaxErr, "it wraps the codec's error")
	assert.Contains(t, entries[0].Err.Error(), `key "bad" at mod revision `+itoa(bad))
	entries[0].Err = nil
	assert.Equal(t, []informer.Entry[string, item]{
		{Key: "bad", Revision: bad}, // listed, never left out: that would read as a delete
		{Key: "good", Value: item{N: 1}, Revision: good},
	}, entries)
	assert.EqualValues(t, 1, src.DecodeErrors())
	assert.Equal(t, []string{"bad"}, handled.get())
}

// One bad write among good ones, as a person or an older program might
// make: the watch hands it over as a bad Put of its key and goes on, so
// that every other key's changes, and the key's own fix, arrive at once.
func TestWatchShouldEmitAnUndecodableValueAsABadPutAndGoOnWithEveryOtherKey(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	ctx := ctxFor(t, 20*time.Second)
	prefix := uniquePrefix(t)
	handled := &handledKeys{}
	src := must.Do(etcdstore.New(cli, prefix, handled.option()))
	_, from, err := src.List(ctx)
	require.NoError(t, err)
	r := startWatch(t, src, from)

	c := &rawWriter{cli, prefix}
	put := func(key string, n int) informer.Revision {
		rev, err := c.Put(ctx, key, item{N: n})
		require.NoError(t, err)
		return rev
	}
	putRaw := func(key, raw string) informer.Revision {
		resp, err := cli.Put(ctx, prefix+key, raw)
		require.NoError(t, err)
		return informer.Revision(resp.Header.Revision)
	}
	a1, b1 := put("a", 1), put("b", 1)
	badC := putRaw("c", "not json")
	d1, a2 := put("d", 1), put("a", 2)
	c1 := put("c", 1) // fixed
	badE := putRaw("e", `{"n":"one"}`)
	delE, _, err := c.Delete(ctx, "e")
	require.NoError(t, err)
	b2 := put("b", 2)

	require.Eventually(t, func() bool {
		return r.endedOr(func() bool { return r.lastRevision() >= b2 })
	}, 10*time.Second, 5*time.Millisecond, "every change arrives")
	require.NoError(t, r.stop(), "the watch goes on past a bad value")
	events, errs := badEvents(t, r.snapshot())
	assert.Equal(t, []informer.Event[string, item]{
		{Type: informer.Put, Key: "a", Value: item{N: 1}, Revision: a1},
		{Type: informer.Put, Key: "b", Value: item{N: 1}, Revision: b1},
		{Type: informer.Put, Key: "c", Revision: badC},
		{Type: informer.Put, Key: "d", Value: item{N: 1}, Revision: d1},
		{Type: informer.Put, Key: "a", Value: item{N: 2}, Revision: a2},
		{Type: informer.Put, Key: "c", Value: item{N: 1}, Revision: c1},
		{Type: informer.Put, Key: "e", Revision: badE},
		{Type: informer.Delete, Key: "e", Revision: delE},
		{Type: informer.Put, Key: "b", Value: item{N: 2}, Revision: b2},
	}, events, "in revision order, the bad values included")
	require.Len(t, errs, 9)
	for i, e := range errs {
		switch i {
		case 2, 6:
			if assert.NotNil(t, e, "event %d carries its DecodeError", i) {
				assert.Equal(t, etcdstore.DecodeError{Prefix: prefix, Key: events[i].Key, Revision: events[i].Revision, Err: e.Err}, *e)
			}
		default:
			assert.Nil(t, e, "event %d decoded", i)
		}
	}
	assert.EqualValues(t, 2, src.DecodeErrors())
	assert.Equal(t, []string{"c", "e"}, handled.get())
}
