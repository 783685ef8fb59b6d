package pgstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/internal/must"
)

// queryLog is a DB tracer that keeps the reader's reads of the log.
type queryLog struct {
	mu       sync.Mutex
	reads    [][2]int64 // (cursor, next] of each read
	notified int        // NOTIFYs that woke the reader
}

func (q *queryLog) Wake(local bool, _ time.Time) {
	if !local {
		q.mu.Lock()
		q.notified++
		q.mu.Unlock()
	}
}

func (q *queryLog) notifies() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.notified
}

func (q *queryLog) Emit(int64, time.Time) {}

// covered says whether a read returned rev.
func (q *queryLog) covered(rev int64) bool {
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
	s := must.Do(pgstore.New[item](db, newColl()))
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

func TestTheWatchingProcesssOwnNotifiesDoNotMakeItsReaderReadTheLog(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	// LISTEN on, no poll for an hour: a read is a wake-up's.
	db := newDB(t, pool, schema, pgstore.WithPollInterval(time.Hour))
	reads := &queryLog{}
	pgstore.SetTracer(db, reads)
	coll := newColl()
	s := must.Do(pgstore.New[item](db, coll))
	other := must.Do(pgstore.New[item](newDB(t, pool, schema), coll)) // another process
	ctx := ctxFor(t, 10*time.Second)
	_, from, err := s.List(ctx)
	require.NoError(t, err)
	events := watchEvents(t, s, from, 20)
	next := func(what string) informer.Event[string, item] {
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			t.Fatalf("%s did not reach the Watch", what)
			return informer.Event[string, item]{}
		}
	}

	// Another process's writes, until one arrives by its NOTIFY: LISTEN is
	// up (until then the reader polls every 10 ms), and the wake-ups before
	// it are spent.
	for i := 0; reads.notifies() == 0; i++ {
		_, err = other.Create(ctx, "remote-"+strconv.Itoa(i), item{N: i})
		require.NoError(t, err)
		assert.Equal(t, "remote-"+strconv.Itoa(i), next("a remote write").Key)
	}
	// One more, whose NOTIFY, delivered in order, comes after every earlier
	// one: once it is in, the reads they cause are done or due (one).
	seen := reads.notifies()
	_, err = other.Create(ctx, "remote-sync", item{N: 1})
	require.NoError(t, err)
	assert.Equal(t, "remote-sync", next("a remote write").Key)
	require.Eventually(t, func() bool { return reads.notifies() > seen }, 10*time.Second, time.Millisecond)
	before := reads.count()
	for i := range 10 {
		_, err := s.Create(ctx, "local-"+strconv.Itoa(i), item{N: i})
		require.NoError(t, err)
		assert.Equal(t, "local-"+strconv.Itoa(i), next("a local write").Key)
	}
	// NOTIFYs reach a listener in commit order: once this one's event is
	// in, every NOTIFY sent after the local writes but one (the NOTIFY of
	// this write may come after a read that found it) has been handled.
	_, err = other.Create(ctx, "remote-last", item{N: 2})
	require.NoError(t, err)
	assert.Equal(t, "remote-last", next("the last remote write").Key)
	// At most: one due from before, the last remote write's, and its late
	// NOTIFY's (if a read found the write first). Ten more, one a local
	// write, if the reader's own NOTIFYs woke it.
	assert.LessOrEqual(t, reads.count()-before, 3, "reads from the local writes to the last remote write's event")
}
