package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
)

// queryLog is a DB tracer that keeps the reader's reads of the log.
type queryLog struct {
	mu    sync.Mutex
	reads [][2]int64 // (cursor, next] of each read
}

func (q *queryLog) Wake(bool, time.Time)  {}
func (q *queryLog) Emit(int64, time.Time) {}
func (q *queryLog) covered(rev int64) bool { // a read returned rev
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.reads {
		if r[0] < rev && rev <= r[1] {
			return true
		}
	}
	return false
}

func (q *queryLog) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.reads)
}

func (q *queryLog) Query(_, _ time.Time, cursor, next, _ int64) {
	q.mu.Lock()
	q.reads = append(q.reads, [2]int64{cursor, next})
	q.mu.Unlock()
}

func TestCommitsOfTheWatchingProcessReachItsWatchWithoutAReadOfTheLog(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	// No poll and no NOTIFY for an hour: whatever reaches the Watch
	// without a read of the log was handed off.
	db := newDB(t, pool, schema, pgstore.WithPollOnly(), pgstore.WithFastPollInterval(time.Hour))
	reads := &queryLog{}
	pgstore.SetTracer(db, reads)
	s := pgstore.New[item](db, newColl())
	ctx := ctxFor(t, 10*time.Second)
	_, from, err := s.List(ctx)
	require.NoError(t, err)
	events := watchEvents(t, s, from, 20)
	// The reader's first read, at its start, would find a write made before it.
	require.Eventually(t, func() bool { return reads.count() > 0 }, 10*time.Second, time.Millisecond)

	var revs []informer.Revision
	for i := range 10 {
		key := []string{"a", "b", "c", "d", "e"}[i%5]
		var rev informer.Revision
		if i < 5 {
			rev, err = s.Create(ctx, key, item{N: i})
		} else {
			rev, err = s.Update(ctx, key, item{N: i}, revs[i-5])
		}
		require.NoError(t, err)
		revs = append(revs, rev)
		select {
		case e := <-events:
			assert.Equal(t, informer.Event[string, item]{Type: informer.Put, Key: key, Value: item{N: i}, Revision: rev}, e)
		case <-ctx.Done():
			t.Fatalf("write %d (revision %d) did not reach the Watch", i, rev)
		}
	}
	del, err := s.Delete(ctx, "a", revs[5])
	require.NoError(t, err)
	select {
	case e := <-events:
		assert.Equal(t, informer.Event[string, item]{Type: informer.Delete, Key: "a", Revision: del}, e)
	case <-ctx.Done():
		t.Fatal("the delete did not reach the Watch")
	}
	for _, rev := range append(revs, del) {
		assert.False(t, reads.covered(int64(rev)), "revision %d was read from the log", rev)
	}

	// The handed-off row is the DB's anchor, with its transaction: a Watch
	// that starts now checks it against the log and must not take the store
	// for restored (it would rebase it and expire).
	var base int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT base FROM `+schema+`.meta`).Scan(&base))
	more := watchEvents(t, s, del, 1)
	rev, err := s.Create(ctx, "z", item{N: 99})
	require.NoError(t, err)
	select {
	case e := <-more:
		assert.Equal(t, rev, e.Revision)
	case <-ctx.Done():
		t.Fatal("a Watch started after the hand-off did not get the next write")
	}
	var after int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT base FROM `+schema+`.meta`).Scan(&after))
	assert.Equal(t, base, after, "the store was rebased: the anchor did not match the log")
}
