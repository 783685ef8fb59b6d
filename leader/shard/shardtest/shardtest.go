// Package shardtest is a conformance suite for shard.Backend
// implementations: every backend's tests call RunBackend, so that all of
// them share one definition of naming and listing. It imports testify and
// is meant only for tests.
package shardtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// RunBackend checks the Backend contract on fresh backends from
// newBackend, whose record names must not collide with any earlier run's
// (prefix them with something unique): Lock returns locks over one record
// per name; List returns exactly the existing records under a prefix, as
// Get reads them, taking the prefix literally (no wildcards); a backend
// Delete removes a record only at its version; List on a
// done context fails.
func RunBackend(t *testing.T, newBackend func(t *testing.T) shard.Backend) {
	t.Run("DeleteShouldRemoveARecordOnlyAtItsVersion", func(t *testing.T) {
		be := newBackend(t)
		d := be
		assert.NoError(t, d.Delete(t.Context(), "absent", 1), "nothing to delete")
		first, err := be.Lock("m/x").Create(t.Context(), sample("a"))
		require.NoError(t, err)
		renewed, err := be.Lock("m/x").Update(t.Context(), first, sample("a"))
		require.NoError(t, err)
		assert.ErrorIs(t, d.Delete(t.Context(), "m/x", first.Version), leader.ErrConflict)
		require.NoError(t, d.Delete(t.Context(), "m/x", renewed.Version))
		_, err = be.Lock("m/x").Get(t.Context())
		assert.ErrorIs(t, err, leader.ErrNotFound)
		got, err := be.List(t.Context(), "m/")
		require.NoError(t, err)
		assert.Empty(t, got)
		again, err := be.Lock("m/x").Create(t.Context(), sample("b"))
		require.NoError(t, err, "a deleted record can be created again")
		assert.NotEqual(t, renewed.Version, again.Version, "with a new version")
	})

	t.Run("LocksOfOneNameShouldShareOneRecord", func(t *testing.T) {
		be := newBackend(t)
		stored, err := be.Lock("one").Create(t.Context(), sample("a"))
		require.NoError(t, err)
		got, err := be.Lock("one").Get(t.Context())
		require.NoError(t, err)
		assert.Equal(t, stored.Version, got.Version)
		_, err = be.Lock("other").Get(t.Context())
		assert.ErrorIs(t, err, leader.ErrNotFound)
	})

	t.Run("ListShouldReturnExactlyTheRecordsUnderThePrefix", func(t *testing.T) {
		be := newBackend(t)
		got, err := be.List(t.Context(), "m/")
		require.NoError(t, err)
		assert.Empty(t, got, "nothing written yet")

		want := map[string]leader.Record{}
		for _, name := range []string{"m/a", "m/b", "m/c/d"} {
			r, err := be.Lock(name).Create(t.Context(), sample(name))
			require.NoError(t, err)
			want[name] = r
		}
		for _, name := range []string{"m", "n/a", "mm/a", "x/m/a"} {
			_, err := be.Lock(name).Create(t.Context(), sample(name))
			require.NoError(t, err)
		}
		b := be.Lock("m/b")
		cur, err := b.Get(t.Context())
		require.NoError(t, err)
		next := cur
		next.HolderIdentity, next.Term = "", cur.Term+1
		want["m/b"], err = b.Update(t.Context(), cur, next)
		require.NoError(t, err)

		got, err = be.List(t.Context(), "m/")
		require.NoError(t, err)
		require.Len(t, got, len(want), "names: %v", keys(got))
		for name, w := range want {
			g, ok := got[name]
			require.True(t, ok, "%s listed", name)
			assert.Equal(t, w.Version, g.Version, name)
			assert.Equal(t, w.HolderIdentity, g.HolderIdentity, name)
			assert.Equal(t, w.Term, g.Term, name)
			assert.Equal(t, w.LeaseDuration, g.LeaseDuration, name)
		}
	})

	t.Run("ListShouldTakeThePrefixLiterally", func(t *testing.T) {
		be := newBackend(t)
		for _, name := range []string{"p%_/1", "pab/2", `p\%_/3`} {
			_, err := be.Lock(name).Create(t.Context(), sample(name))
			require.NoError(t, err)
		}
		got, err := be.List(t.Context(), "p%_/")
		require.NoError(t, err)
		assert.Equal(t, []string{"p%_/1"}, keys(got))
	})

	t.Run("ListShouldFailOnADoneContext", func(t *testing.T) {
		be := newBackend(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := be.List(ctx, "m/")
		assert.Error(t, err)
	})
}

func sample(holder string) leader.Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return leader.Record{HolderIdentity: holder, Term: 1, LeaseDuration: 15 * time.Second, AcquireTime: at, RenewTime: at}
}

func keys(m map[string]leader.Record) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Prefixed is a Backend whose names all start with Prefix, so that a
// conformance run on a shared server sees none of an earlier run's
// records: Lock and List add Prefix, and List strips it again.
type Prefixed struct {
	shard.Backend
	Prefix string
}

// Lock returns the lock called Prefix+name.
func (p Prefixed) Lock(name string) leader.Lock { return p.Backend.Lock(p.Prefix + name) }

// Delete deletes the record called Prefix+name at version.
func (p Prefixed) Delete(ctx context.Context, name string, version int64) error {
	return p.Backend.Delete(ctx, p.Prefix+name, version)
}

// List lists Prefix+prefix and returns the names without Prefix.
func (p Prefixed) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	recs, err := p.Backend.List(ctx, p.Prefix+prefix)
	if err != nil {
		return nil, err
	}
	out := make(map[string]leader.Record, len(recs))
	for name, r := range recs {
		out[strings.TrimPrefix(name, p.Prefix)] = r
	}
	return out, nil
}
