package reconcile_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/reconciletest"
)

// pod is a child whose value names its owner; "" is none.
type pod struct{ owner string }

func podOwner(_ string, p pod) (string, bool) { return p.owner, p.owner != "" }

// keyLog records the keys reconciled, in order.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (l *keyLog) Reconcile(_ context.Context, key string) (reconcile.Result, error) {
	l.mu.Lock()
	l.keys = append(l.keys, key)
	l.mu.Unlock()
	return reconcile.Result{}, nil
}

func (l *keyLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.keys
	l.keys = nil
	slices.Sort(out)
	return out
}

func entryKeys[K comparable, V any](entries []informer.Entry[K, V]) []K {
	keys := make([]K, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
	}
	return keys
}

func TestOwnsReconcilesTheOwnerOfAChildAndBothOwnersWhenItChangesHands(t *testing.T) {
	h := reconciletest.New(t)
	pods := must.Do(memstore.New[string, pod]())
	podInf := reconciletest.Informer(h, "pods", pods)
	log := &keyLog{}
	reconciletest.Controller(h, "rs", log, reconcile.Owns(podInf, podOwner))
	h.Settle()
	require.Empty(t, log.take())

	pods.Put("p1", pod{owner: "rs-a"})
	h.Settle()
	assert.Equal(t, []string{"rs-a"}, log.take(), "a new child reconciles its owner")

	pods.Put("p1", pod{owner: "rs-b"})
	h.Settle()
	assert.Equal(t, []string{"rs-a", "rs-b"}, log.take(), "a child that changes hands reconciles the old owner and the new one")

	pods.Put("p2", pod{})
	h.Settle()
	assert.Empty(t, log.take(), "a child without an owner reconciles nothing")

	_, _ = pods.Delete(context.Background(), "p1", 0)
	h.Settle()
	assert.Equal(t, []string{"rs-b"}, log.take(), "a deleted child reconciles its last owner")
}

func TestOwnedListsAnOwnersCachedChildren(t *testing.T) {
	h := reconciletest.New(t)
	pods := must.Do(memstore.New[string, pod]())
	pods.Put("p0", pod{owner: "rs-a"}) // listed before the controller exists
	podInf := reconciletest.Informer(h, "pods", pods)
	reconciletest.Controller(h, "rs", &keyLog{}, reconcile.Owns(podInf, podOwner))
	pods.Put("p1", pod{owner: "rs-a"})
	pods.Put("p2", pod{owner: "rs-b"})
	pods.Put("p3", pod{})
	h.Settle()

	a := entryKeys(reconcile.Owned(podInf, "rs-a"))
	slices.Sort(a)
	assert.Equal(t, []string{"p0", "p1"}, a)
	assert.Equal(t, []string{"p2"}, entryKeys(reconcile.Owned(podInf, "rs-b")))
	assert.Empty(t, reconcile.Owned(podInf, "rs-c"))

	pods.Put("p1", pod{owner: "rs-b"})
	h.Settle()
	assert.Equal(t, []string{"p0"}, entryKeys(reconcile.Owned(podInf, "rs-a")))
}

func TestOwnsFilesOwnersOfOtherKeyTypesByTheirPrintedForm(t *testing.T) {
	h := reconciletest.New(t)
	pods := must.Do(memstore.New[string, int]()) // value: the owner's number
	podInf := reconciletest.Informer(h, "pods", pods)
	var mu sync.Mutex
	var got []int
	rec := reconcile.Func(func(_ context.Context, k int) (reconcile.Result, error) {
		mu.Lock()
		got = append(got, k)
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	reconciletest.Controller(h, "rs", rec, reconcile.Owns(podInf, func(_ string, owner int) (int, bool) { return owner, true }))
	pods.Put("p1", 7)
	h.Settle()
	mu.Lock()
	assert.Equal(t, []int{7}, got)
	mu.Unlock()
	assert.Equal(t, []string{"p1"}, entryKeys(reconcile.Owned(podInf, 7)))
	assert.Equal(t, []string{"p1"}, entryKeys(podInf.ByIndex(reconcile.OwnerIndexOf("rs"), strconv.Itoa(7))))
}

func TestOwnsAddsItsIndexToAnInformerThatIsAlreadyRunning(t *testing.T) {
	pods := must.Do(memstore.New[string, pod]())
	pods.Put("p1", pod{owner: "rs-a"})
	podInf := must.Do(informer.New("pods", pods))
	runInformer(t, podInf)
	require.False(t, podInf.HasIndex(reconcile.OwnerIndexOf("rs")))

	_, err := reconcile.New("rs", &keyLog{}, reconcile.Owns(podInf, podOwner))
	require.NoError(t, err)
	assert.Equal(t, []string{"p1"}, entryKeys(reconcile.Owned(podInf, "rs-a")), "the cached children are indexed at once")
}

func TestOwnsRejectsNilArgumentsASecondOwnerIndexAndAnotherKeyType(t *testing.T) {
	newPods := func() *informer.Informer[string, pod] {
		return must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	}
	ok := &keyLog{}
	for _, tc := range []struct {
		name string
		opts func() []reconcile.Option
		want string
	}{
		{"nil informer", func() []reconcile.Option {
			return []reconcile.Option{reconcile.Owns[string, string, pod](nil, podOwner)}
		}, "nil informer"},
		{"nil owner function", func() []reconcile.Option {
			return []reconcile.Option{reconcile.Owns[string, string, pod](newPods(), nil)}
		}, "nil informer or owner function"},
		{"nil predicate", func() []reconcile.Option {
			return []reconcile.Option{reconcile.Owns(newPods(), podOwner, nil)}
		}, "predicate 0 is nil"},
		{"two Owns of one informer", func() []reconcile.Option {
			p := newPods()
			return []reconcile.Option{reconcile.Owns(p, podOwner), reconcile.Owns(p, podOwner)}
		}, "owns it twice"},
		{"an informer with this controller's owner index", func() []reconcile.Option {
			p := newPods()
			require.NoError(t, p.AddIndex(reconcile.OwnerIndexOf("rs"), func(string, pod) []string { return nil }))
			return []reconcile.Option{reconcile.Owns(p, podOwner)}
		}, "has an index named"},
		{"owner keys of another type", func() []reconcile.Option {
			return []reconcile.Option{reconcile.Owns(newPods(), func(string, pod) (int, bool) { return 0, false })}
		}, "another type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reconcile.New("rs", ok, tc.opts()...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestANewThatFailsLeavesNoOwnerIndexBehind(t *testing.T) {
	pods := must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	_, err := reconcile.New("rs", &keyLog{}, reconcile.Owns(pods, func(string, pod) (int, bool) { return 0, false }))
	require.Error(t, err)
	assert.False(t, pods.HasIndex(reconcile.OwnerIndexOf("rs")))
	_, err = reconcile.New("rs", &keyLog{}, reconcile.Owns(pods, podOwner))
	require.NoError(t, err, "a corrected New can still own the informer")
	assert.True(t, pods.HasIndex(reconcile.OwnerIndexOf("rs")))
}

func TestOwnedPanicsOnAnInformerNotGivenToOwns(t *testing.T) {
	pods := must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	defer func() {
		r := recover()
		require.NotNil(t, r)
		assert.True(t, strings.Contains(r.(string), "reconcile.Owns"), r)
	}()
	reconcile.Owned(pods, "rs-a")
}

// job is a child with two owners of two kinds: a ReplicaSet and a Job.
type job struct{ rs, job string }

func TestTwoControllersShouldOwnOneChildInformerEachThroughItsOwnRelation(t *testing.T) {
	h := reconciletest.New(t)
	pods := must.Do(memstore.New[string, job]())
	podInf := reconciletest.Informer(h, "pods", pods)
	rsLog, jobLog := &keyLog{}, &keyLog{}
	reconciletest.Controller(h, "replicasets", rsLog,
		reconcile.Owns(podInf, func(_ string, p job) (string, bool) { return p.rs, p.rs != "" }))
	reconciletest.Controller(h, "jobs", jobLog,
		reconcile.Owns(podInf, func(_ string, p job) (string, bool) { return p.job, p.job != "" }))
	pods.Put("p1", job{rs: "web"})
	pods.Put("p2", job{job: "web"})
	pods.Put("p3", job{job: "batch"})
	h.Settle()

	assert.Equal(t, []string{"web"}, rsLog.take())
	assert.Equal(t, []string{"batch", "web"}, jobLog.take())
	assert.Equal(t, []string{"p1"}, entryKeys(reconcile.OwnedBy(podInf, "replicasets", "web")))
	assert.Equal(t, []string{"p2"}, entryKeys(reconcile.OwnedBy(podInf, "jobs", "web")),
		"an owner key of one relation does not list the children of the same key in another")
	assert.Empty(t, reconcile.OwnedBy(podInf, "replicasets", "batch"))

	defer func() {
		r := recover()
		require.NotNil(t, r, "Owned cannot tell which relation is meant")
		assert.Contains(t, r, "OwnedBy")
	}()
	reconcile.Owned(podInf, "web")
}

// Owned's entries carry the revision of the cached value, so that a
// reconciler deletes a child only if nobody changed it since its cache saw
// it.
func TestOwnedEntriesShouldCarryTheRevisionThatMakesADeleteConditional(t *testing.T) {
	h := reconciletest.New(t)
	pods := must.Do(memstore.New[string, pod]())
	podInf := reconciletest.Informer(h, "pods", pods)
	reconciletest.Controller(h, "rs", &keyLog{}, reconcile.Owns(podInf, podOwner))
	pods.Put("p1", pod{owner: "rs-a"})
	pods.Put("p2", pod{owner: "rs-a"})
	h.Settle()
	entries := reconcile.Owned(podInf, "rs-a")
	require.Len(t, entries, 2)
	slices.SortFunc(entries, func(a, b informer.Entry[string, pod]) int { return strings.Compare(a.Key, b.Key) })
	require.NotZero(t, entries[0].Revision, "an owned entry carries the revision the cache holds")

	pods.Put("p1", pod{owner: "rs-a"}) // changed behind the cache's back
	_, err := pods.Delete(context.Background(), "p1", entries[0].Revision)
	require.ErrorIs(t, err, informer.ErrConflict, "a child changed since the cache saw it is not deleted")
	_, err = pods.Delete(context.Background(), "p2", entries[1].Revision)
	require.NoError(t, err, "an unchanged child is")
}

func TestTwoManagersShouldEachSeeOnlyTheOwnerRelationsOfTheirOwnInformers(t *testing.T) {
	// Two Managers in one process, with the same informer and controller
	// names, over different stores: the relations live on each child
	// informer, nowhere else.
	type side struct {
		pods *memstore.Store[string, pod]
		inf  *informer.Informer[string, pod]
	}
	var sides [2]side
	for i := range sides {
		h := reconciletest.New(t)
		pods := must.Do(memstore.New[string, pod]())
		sides[i] = side{pods: pods, inf: reconciletest.Informer(h, "pods", pods)}
		reconciletest.Controller(h, "rs", &keyLog{}, reconcile.Owns(sides[i].inf, podOwner))
		pods.Put("p"+strconv.Itoa(i), pod{owner: "rs-a"})
		h.Settle()
	}
	for i, s := range sides {
		assert.Equal(t, []string{"p" + strconv.Itoa(i)}, entryKeys(reconcile.Owned(s.inf, "rs-a")), "manager %d", i)
		assert.Equal(t, []string{"p" + strconv.Itoa(i)}, entryKeys(reconcile.OwnedBy(s.inf, "rs", "rs-a")), "manager %d", i)
	}

	// An informer given to neither is owned by nobody.
	other := must.Do(informer.New("pods", must.Do(memstore.New[string, pod]())))
	assert.Panics(t, func() { reconcile.Owned(other, "rs-a") })
}
