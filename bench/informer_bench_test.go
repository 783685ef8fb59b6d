package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
)

// informerSizes are the numbers of objects of the informer scenarios, one
// sub-benchmark level each (.../10k, .../100k, .../1M).
var informerSizes = []int{10_000, 100_000, 1_000_000}

const (
	// fanoutUpdates is how many updates the fan-out scenario pushes,
	// cycling over the keys: 10 per key at 10k objects, one per key at
	// 100k, and one for each of the first 100k keys at 1M.
	fanoutUpdates = 100_000
	// informerTimeout bounds every wait of the informer scenarios.
	informerTimeout = 5 * time.Minute
)

// syncObjects is the minimum number of objects synced per b.N iteration
// of BenchmarkInformerSync: a sync of 10k objects takes a few ms, which a
// noisy machine blurs, so it is repeated (on a fresh source and informer
// each time) until this many objects have been synced.
const syncObjects = 200_000

// BenchmarkInformerSync is scenario 7: the source holds N objects (built
// before timing); the time from creating and starting the informer until
// its one handler has been given all N adds (counted by the handler, which
// does nothing else) and the informer and the handler's registration report
// synced. Each b.N iteration syncs max(1, 200k/N) times. Reports the mean
// sync-ms and objects/s over all of them.
func BenchmarkInformerSync(b *testing.B) {
	forEachInformer(b, func(b *testing.B, im infImpl, o *informerObjects) {
		var total time.Duration
		reps := max(1, syncObjects/o.n)
		for range b.N * reps {
			d, _ := syncOnce(b, im, o, false)
			total += d
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(total.Seconds()*1000/float64(b.N*reps), "sync-ms")
		b.ReportMetric(float64(b.N*reps*o.n)/total.Seconds(), "objects/s")
	})
}

// BenchmarkInformerMemory is scenario 8: live heap per cached object after
// the sync of scenario 7 (HeapAlloc after GC before creating the informer
// and after it synced, divided by N). The source, its objects and the
// handler exist before the first reading, so only what the informer
// allocated and still holds is counted: its cache, its handler's buffer,
// and, for client-go, the keys it computes. Reports B/object.
//
// With INFORMER_HEAP_PROFILE set to a directory, every run also writes
// heap profiles of every allocation (runtime.MemProfileRate 1) taken at
// the two readings, <impl>-<N>-before.pprof and -after.pprof, so that
// `go tool pprof -sample_index=inuse_space -base before after` accounts
// for every byte the informer holds (docs/design/informer-memory.md).
func BenchmarkInformerMemory(b *testing.B) {
	forEachInformer(b, func(b *testing.B, im infImpl, o *informerObjects) {
		var sum float64
		for range b.N {
			_, bytes := syncOnce(b, im, o, true)
			sum += bytes
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(sum/float64(b.N), "B/object")
	})
}

// BenchmarkInformerFanout is scenario 9: after the informer synced (not
// timed), 100k updates are pushed through the source, cycling over the
// keys, and timed until the one handler has been given the final version
// of every updated key. converge may coalesce updates that its handler has
// not been given yet, which its contract allows; client-go delivers every
// one. Reports events/s (updates pushed per second until the final state
// was seen) and callbacks (OnUpdate calls the handler received).
func BenchmarkInformerFanout(b *testing.B) {
	forEachInformer(b, func(b *testing.B, im infImpl, o *informerObjects) {
		var total time.Duration
		var callbacks int
		for range b.N {
			d, c := fanoutOnce(b, im, o)
			total += d
			callbacks += c
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(b.N*len(o.updates))/total.Seconds(), "events/s")
		b.ReportMetric(float64(callbacks)/float64(b.N), "callbacks")
	})
}

// forEachInformer runs fn as sub-benchmark <impl>/<N> for every informer
// and size. The objects are built outside the timing and reused by the
// consecutive runs of one sub-benchmark (-count).
func forEachInformer(b *testing.B, fn func(*testing.B, infImpl, *informerObjects)) {
	for _, im := range infImpls {
		b.Run(im.name, func(b *testing.B) {
			for _, n := range informerSizes {
				b.Run(sizeName(n), func(b *testing.B) {
					b.StopTimer()
					fn(b, im, cachedInformerObjects(n))
				})
			}
		})
	}
}

func sizeName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// syncOnce runs scenario 7 once on a fresh source and informer, and
// returns the time to synced and, if measureHeap, the heap the informer
// holds per object once synced.
func syncOnce(b *testing.B, im infImpl, o *informerObjects, measureHeap bool) (time.Duration, float64) {
	p := im.newPipeline(o, 0)
	h := newObjHandler(o, false)
	settle()
	var m0, m1 runtime.MemStats
	if measureHeap {
		runtime.ReadMemStats(&m0)
		writeHeapProfile(b, im.name, o.n, "before")
	}
	start := time.Now()
	p.start(h)
	if !waitOrTimeout(h.addsDone, informerTimeout) {
		p.stop()
		b.Fatalf("%s: the handler got %d of %d adds within %v", im.name, h.addCount(), o.n, informerTimeout)
	}
	if err := p.waitSynced(informerTimeout); err != nil {
		p.stop()
		b.Fatalf("%s: %v", im.name, err)
	}
	elapsed := time.Since(start)
	var perObject float64
	if measureHeap {
		settle()
		runtime.ReadMemStats(&m1)
		writeHeapProfile(b, im.name, o.n, "after")
		perObject = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(o.n)
	}
	p.stop()
	if err := p.check(); err != nil {
		b.Fatalf("%s: %v", im.name, err)
	}
	if h.updates != 0 {
		b.Fatalf("%s: %d updates during the initial sync", im.name, h.updates)
	}
	runtime.KeepAlive(h)
	return elapsed, perObject
}

// heapProfileEnv names the directory BenchmarkInformerMemory writes heap
// profiles to; unset, it writes none.
const heapProfileEnv = "INFORMER_HEAP_PROFILE"

func init() {
	if os.Getenv(heapProfileEnv) != "" {
		// Before the objects are built, so that every allocation is
		// sampled: the profiles are then exact, not estimates.
		runtime.MemProfileRate = 1
	}
}

// writeHeapProfile writes the heap profile named for impl, n and when to
// the directory INFORMER_HEAP_PROFILE names, if it is set. The heap has
// just been collected twice (settle): the profile is that of the last
// cycle, so it shows exactly what ReadMemStats counted.
func writeHeapProfile(b *testing.B, impl string, n int, when string) {
	dir := os.Getenv(heapProfileEnv)
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pprof", impl, sizeName(n), when)))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// fanoutOnce runs scenario 9 once on a fresh source and informer, and
// returns the time from the first update pushed until the handler had
// seen the final version of every updated key, and the number of OnUpdate
// calls it received.
func fanoutOnce(b *testing.B, im infImpl, o *informerObjects) (time.Duration, int) {
	p := im.newPipeline(o, len(o.updates))
	h := newObjHandler(o, true)
	p.start(h)
	if !waitOrTimeout(h.addsDone, informerTimeout) {
		p.stop()
		b.Fatalf("%s: the handler got %d of %d adds within %v", im.name, h.addCount(), o.n, informerTimeout)
	}
	if err := p.waitSynced(informerTimeout); err != nil {
		p.stop()
		b.Fatalf("%s: %v", im.name, err)
	}
	settle()
	start := time.Now()
	for _, u := range o.updates {
		p.push(u)
	}
	ok := waitOrTimeout(h.fanDone, informerTimeout)
	elapsed := time.Since(start)
	p.stop()
	if !ok {
		b.Fatalf("%s: the handler saw the final version of %d of %d keys within %v",
			im.name, o.updated-int(h.remaining.Load()), o.updated, informerTimeout)
	}
	if err := p.check(); err != nil {
		b.Fatalf("%s: %v", im.name, err)
	}
	return elapsed, h.updates
}

// ---- objects ----

// benchObj is the object both informers cache: a typed Kubernetes-style
// object, as real controllers use, of about 550 B of heap with its strings
// (352 B struct, ~200 B of strings: name, namespace, UID, resourceVersion
// and a spec). idx and gen are for the benchmark's handlers only: the
// object's index in the scenario's keys, and how many updates produced it.
type benchObj struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              benchSpec `json:"spec"`

	idx, gen int32
}

type benchSpec struct {
	Image          string `json:"image"`
	NodeName       string `json:"nodeName"`
	ServiceAccount string `json:"serviceAccount"`
	Command        string `json:"command"`
	Shard          string `json:"shard"`
}

// DeepCopyObject implements runtime.Object. Strings are immutable, so
// copying the struct and the ObjectMeta's maps and slices is a deep copy.
func (o *benchObj) DeepCopyObject() kruntime.Object {
	c := *o
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// benchObjList is what the client-go lister returns. Its items are
// pointers, so client-go caches the very objects the list holds (as
// converge caches the memory store's values) instead of copies.
type benchObjList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []*benchObj `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *benchObjList) DeepCopyObject() kruntime.Object {
	c := &benchObjList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]*benchObj, len(l.Items))
	for i, o := range l.Items {
		c.Items[i] = o.DeepCopyObject().(*benchObj)
	}
	return c
}

// informerObjects is the data of one size: N objects and their keys, and
// the updates of the fan-out scenario.
type informerObjects struct {
	n    int
	keys []string // keys[i] is objs[i]'s "namespace/name"
	objs []*benchObj
	// updates are shallow copies of the objects with a new
	// resourceVersion and gen, cycling over the keys; updates[j] updates
	// key j%n.
	updates []*benchObj
	// final[i] is the gen of key i's last update (0: none); updated is
	// the number of keys with updates.
	final   []int32
	updated int
}

func newInformerObjects(n, updates int) *informerObjects {
	o := &informerObjects{n: n, keys: distinctKeys(n), objs: make([]*benchObj, n)}
	for i, k := range o.keys {
		ns, name, _ := strings.Cut(k, "/")
		o.objs[i] = &benchObj{
			TypeMeta: metav1.TypeMeta{APIVersion: "bench.converge.dev/v1", Kind: "BenchObject"},
			ObjectMeta: metav1.ObjectMeta{
				Name:              strings.Clone(name),
				Namespace:         strings.Clone(ns),
				UID:               types.UID(fmt.Sprintf("%08x-7a1c-4b2e-9d3f-%012x", i, i*7919)),
				ResourceVersion:   strconv.Itoa(i + 1), // the memory store's revision of its Put
				Generation:        1,
				CreationTimestamp: metav1.Unix(1_750_000_000+int64(i), 0),
			},
			Spec: benchSpec{
				Image:          fmt.Sprintf("registry.example.com/team-%02d/app:v1.%d.%d", i%100, i%7, i%13),
				NodeName:       fmt.Sprintf("node-%05d", i%5000),
				ServiceAccount: fmt.Sprintf("sa-%02d", i%100),
				Command:        fmt.Sprintf("/bin/app --id=%07d --zone=z%d", i, i%3),
				Shard:          fmt.Sprintf("shard-%02d", i%64),
			},
			idx: int32(i),
		}
	}
	o.final = make([]int32, n)
	o.updates = make([]*benchObj, updates)
	for j := range o.updates {
		i := j % n
		o.final[i]++
		u := *o.objs[i]
		u.ResourceVersion = strconv.Itoa(n + j + 1)
		u.Generation = int64(o.final[i]) + 1
		u.gen = o.final[i]
		o.updates[j] = &u
	}
	o.updated = min(n, updates)
	return o
}

var informerObjectsCache struct {
	sync.Mutex
	o *informerObjects
}

// cachedInformerObjects returns the objects of size n, building them if
// the last size asked for was another: only one size is kept alive, so
// that a smaller scenario does not run with a larger one's heap.
func cachedInformerObjects(n int) *informerObjects {
	c := &informerObjectsCache
	c.Lock()
	defer c.Unlock()
	if c.o == nil || c.o.n != n {
		c.o = nil
		settle()
		c.o = newInformerObjects(n, fanoutUpdates)
	}
	return c.o
}

// ---- the handler ----

// objHandler is the one handler of every informer scenario. Its methods
// run on the informer's delivery goroutine only (one per handler in both
// informers); the benchmark reads its counters after the channel that
// ends the phase is closed.
type objHandler struct {
	n        int
	adds     atomic.Int64 // read by a failing benchmark while deliveries run
	addsDone chan struct{}
	updates  int

	// fan-out only (final == nil otherwise): got[i] is the gen of key i
	// last given to the handler; remaining counts keys whose final gen it
	// has not been given yet.
	final     []int32
	got       []int32
	remaining atomic.Int64
	fanDone   chan struct{}
}

func newObjHandler(o *informerObjects, fanout bool) *objHandler {
	h := &objHandler{n: o.n, addsDone: make(chan struct{}), fanDone: make(chan struct{})}
	if fanout {
		h.final = o.final
		h.got = make([]int32, o.n)
		h.remaining.Store(int64(o.updated))
	}
	return h
}

func (h *objHandler) addCount() int { return int(h.adds.Load()) }

func (h *objHandler) onAdd(*benchObj) {
	if h.adds.Add(1) == int64(h.n) {
		close(h.addsDone)
	}
}

func (h *objHandler) onUpdate(o *benchObj) {
	h.updates++
	if h.final == nil {
		return
	}
	i := o.idx
	if o.gen == h.final[i] && h.got[i] != o.gen {
		if h.remaining.Add(-1) == 0 {
			close(h.fanDone)
		}
	}
	h.got[i] = o.gen
}

// ---- the two informers ----

// infPipeline is a source holding the scenario's objects and an informer
// following it, with one handler.
type infPipeline interface {
	// start creates the informer with h as its only handler and runs it.
	start(h *objHandler)
	// waitSynced waits, without polling, until the informer and the
	// handler's registration report synced.
	waitSynced(timeout time.Duration) error
	// push writes an update through the source.
	push(u *benchObj)
	// stop stops the informer and waits for its goroutines.
	stop()
	// check reports anything the scenario did not expect, such as a
	// relist; called after stop.
	check() error
}

// infImpl is one informer under test.
type infImpl struct {
	name string
	// newPipeline builds a source holding o's objects, with room for
	// updates watch events; this is not timed.
	newPipeline func(o *informerObjects, updates int) infPipeline
}

var infImpls = []infImpl{
	{name: "converge", newPipeline: newConvergePipeline},
	{name: "client-go", newPipeline: newClientGoPipeline},
}

// convergePipeline: a memstore.Store keyed by "namespace/name" holding the
// object pointers, followed by an informer.Informer with default options.
type convergePipeline struct {
	o      *informerObjects
	store  *memstore.Store[string, *benchObj]
	inf    *informer.Informer[string, *benchObj]
	reg    *informer.Registration[string, *benchObj]
	cancel context.CancelFunc
	done   chan struct{}
}

func newConvergePipeline(o *informerObjects, _ int) infPipeline {
	s := must.Do(memstore.New[string, *benchObj]())
	for i, k := range o.keys {
		s.Put(k, o.objs[i])
	}
	return &convergePipeline{o: o, store: s}
}

func (p *convergePipeline) start(h *objHandler) {
	p.inf = must.Do(informer.New("bench", informer.Source[string, *benchObj](p.store)))
	reg, err := p.inf.AddHandler(informer.HandlerFuncs[string, *benchObj]{
		AddFunc:    func(_ string, v *benchObj, _ bool) { h.onAdd(v) },
		UpdateFunc: func(_ string, _, v *benchObj, _ bool) { h.onUpdate(v) },
	})
	if err != nil {
		panic(err)
	}
	p.reg = reg
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		_ = p.inf.Run(ctx)
	}()
}

func (p *convergePipeline) waitSynced(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.inf.WaitForSync(ctx); err != nil {
		return err
	}
	if !p.reg.HasSynced() {
		return errors.New("informer synced but its handler's registration did not")
	}
	return nil
}

func (p *convergePipeline) push(u *benchObj) { p.store.Put(p.o.keys[u.idx], u) }

func (p *convergePipeline) stop() {
	p.cancel()
	<-p.done
}

func (p *convergePipeline) check() error {
	return listedOnce(p.inf.Stats())
}

// listedOnce fails unless a converge informer listed once and never had to
// list or watch again: a restart would make the run measure something else.
func listedOnce(st informer.Stats) error {
	if st.Lists != 1 || st.ListErrors+st.WatchErrors+st.Expired != 0 {
		return fmt.Errorf("informer restarted: %+v", st)
	}
	return nil
}

// clientGoPipeline: a sharedInformer, started (and so created) when the
// timing starts, with the counting handler.
type clientGoPipeline struct {
	*sharedInformer
	o       *informerObjects
	updates int
	reg     cache.ResourceEventHandlerRegistration
	cancel  context.CancelFunc
	done    chan struct{}
}

func newClientGoPipeline(o *informerObjects, updates int) infPipeline {
	return &clientGoPipeline{o: o, updates: updates}
}

// listLW is a ListWatch that tells the reflector it does not support
// watch-list semantics: since v0.35 the reflector otherwise streams the
// initial state through the watch and never calls the list.
type listLW struct{ *cache.ListWatch }

func (listLW) IsWatchListSemanticsUnSupported() bool { return true }

func (p *clientGoPipeline) start(h *objHandler) {
	p.sharedInformer = newSharedInformer(p.o, p.updates)
	reg, err := p.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.onAdd(obj.(*benchObj)) },
		UpdateFunc: func(_, obj any) { h.onUpdate(obj.(*benchObj)) },
	})
	if err != nil {
		panic(err)
	}
	p.reg = reg
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.inf.RunWithContext(ctx)
	}()
}

func (p *clientGoPipeline) waitSynced(timeout time.Duration) error {
	for _, c := range []cache.DoneChecker{p.inf.HasSyncedChecker(), p.reg.HasSyncedChecker()} {
		if !waitOrTimeout(c.Done(), timeout) {
			return fmt.Errorf("not synced within %v", timeout)
		}
	}
	return nil
}

func (p *clientGoPipeline) stop() {
	p.cancel()
	<-p.done
}

// sharedInformer is the client-go side's store and informer, used by the
// informer scenarios' client-go pipeline and by the client-go and
// controller-runtime controller pipelines: the fake ListWatch of the
// informer scenarios (a list of the object pointers, wrapped in listLW, and
// a FakeWatcher with room for every update so that a write never waits)
// followed by a SharedIndexInformer with no indexers and no resync.
type sharedInformer struct {
	o       *informerObjects
	w       *watch.FakeWatcher
	lists   atomic.Int32
	watches atomic.Int32
	inf     cache.SharedIndexInformer
}

func newSharedInformer(o *informerObjects, updates int) *sharedInformer {
	s := &sharedInformer{o: o, w: watch.NewFakeWithChanSize(updates, false)}
	rv := strconv.Itoa(o.n)
	lw := listLW{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (kruntime.Object, error) {
			s.lists.Add(1)
			// A fresh slice of the same pointers, as memstore.Store.List
			// returns a fresh slice of its values.
			return &benchObjList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: slices.Clone(o.objs)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			if s.watches.Add(1) > 1 {
				return nil, errors.New("bench: the fake watch cannot be resumed")
			}
			return s.w, nil
		},
	}}
	s.inf = cache.NewSharedIndexInformer(lw, &benchObj{}, 0, cache.Indexers{})
	return s
}

// get is the reconcilers' cache read.
func (s *sharedInformer) get(key string) (*benchObj, bool) {
	obj, ok, err := s.inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*benchObj), true
}

func (s *sharedInformer) push(u *benchObj) { s.w.Modify(u) }

func (s *sharedInformer) check() error {
	if l, w := s.lists.Load(), s.watches.Load(); l != 1 || w != 1 {
		return fmt.Errorf("reflector restarted: %d lists, %d watches", l, w)
	}
	return nil
}
