package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/memlock"
	"github.com/converge-go/converge/reconcile"
)

// Spec is the desired state of an app in this package's examples.
type Spec struct{ Replicas int }

// waitIdle polls until inf has seen every write to store and c has nothing
// left to do; tests use package reconciletest instead.
func waitIdle(c interface{ Idle() bool }, inf *informer.Informer[string, Spec], store *memstore.Store[string, Spec]) {
	for inf.LastRevision() < store.Revision() || !c.Idle() {
		time.Sleep(time.Millisecond)
	}
}

// A controller that scales a pretend set of replicas to what the store
// asks for, run by a Manager.
func Example() {
	store, err := memstore.New[string, Spec]() // desired state: the embedded store
	if err != nil {
		log.Fatal(err)
	}
	specs, err := informer.New("specs", store) // a cache that follows it
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	running := map[string]int{} // observed state: what we run

	scaler, err := reconcile.New("scaler", reconcile.Func(func(ctx context.Context, name string) (reconcile.Result, error) {
		spec, ok := specs.Get(name) // read the desired state; never an event
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !ok && running[name] > 0:
			fmt.Printf("%s: deleted, stopping %d\n", name, running[name])
			delete(running, name)
		case ok && running[name] != spec.Replicas:
			fmt.Printf("%s: scaling %d -> %d\n", name, running[name], spec.Replicas)
			running[name] = spec.Replicas
		}
		return reconcile.Result{}, nil
	}), reconcile.For(specs))
	if err != nil {
		panic(err)
	}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "off", Logger: quietLogger})
	if err != nil {
		panic(err)
	}
	_ = m.AddController(scaler) // and the informer it watches

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	store.Put("web", Spec{Replicas: 3})
	waitIdle(scaler, specs, store)
	store.Put("web", Spec{Replicas: 5})
	waitIdle(scaler, specs, store)
	_, _ = store.Delete(context.Background(), "web", 0)
	waitIdle(scaler, specs, store)
	stop()
	fmt.Println("manager:", <-done)
	// Output:
	// web: scaling 0 -> 3
	// web: scaling 3 -> 5
	// web: deleted, stopping 5
	// manager: <nil>
}

// A reconciler tells the controller what to do next by what it returns.
func ExampleResult() {
	rec := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		switch key {
		case "waiting-for-dns":
			// Nothing to watch: look again in a minute.
			return reconcile.Result{RequeueAfter: time.Minute}, nil
		case "bad-spec":
			// Retrying cannot help: no retry until the key changes.
			return reconcile.Result{}, reconcile.Terminal(errors.New("replicas must not be negative"))
		case "api-down":
			// Retried with per-key exponential backoff.
			return reconcile.Result{}, errors.New("connection refused")
		}
		return reconcile.Result{}, nil // done until the key changes
	})
	_, err := rec.Reconcile(context.Background(), "bad-spec")
	fmt.Println(reconcile.IsTerminal(err), err)
	// Output: true terminal: replicas must not be negative
}

// Secondary watches map changes of other objects to the keys they matter
// to: here a pod's change reconciles its owner.
func ExampleWatch() {
	type Pod struct{ Owner string }
	appStore, err := memstore.New[string, Spec]()
	if err != nil {
		log.Fatal(err)
	}
	podStore, err := memstore.New[string, Pod]()
	if err != nil {
		log.Fatal(err)
	}
	apps, err := informer.New("apps", appStore)
	if err != nil {
		log.Fatal(err)
	}
	pods, err := informer.New("pods", podStore)
	if err != nil {
		log.Fatal(err)
	}
	_, err = reconcile.New("apps", reconcile.Func(noop),
		reconcile.For(apps),
		reconcile.Watch(pods, func(_ string, p Pod) []string { return []string{p.Owner} }),
	)
	fmt.Println(err)
	// Output: <nil>
}

// Leader election: every replica runs the informers, only the leader the
// controllers, and each reconcile knows its term, for fencing its writes.
func ExampleManager_leaderElection() {
	store, err := memstore.New[string, Spec]()
	if err != nil {
		log.Fatal(err)
	}
	store.Put("web", Spec{Replicas: 3})
	specs, err := informer.New("specs", store)
	if err != nil {
		log.Fatal(err)
	}
	c, _ := reconcile.New("scaler", reconcile.Func(func(ctx context.Context, name string) (reconcile.Result, error) {
		term, _ := leader.TermFromContext(ctx)
		fmt.Printf("reconciling %s in term %d\n", name, term)
		return reconcile.Result{}, nil
	}), reconcile.For(specs))

	m, err := reconcile.NewManager(reconcile.ManagerOptions{
		Addr:   "off",
		Lock:   memlock.NewLock(), // leader/etcdlock or leader/pglock across machines
		Leader: leader.Config{Identity: "replica-1", ReleaseOnCancel: true},
		Logger: quietLogger,
	})
	if err != nil {
		panic(err)
	}
	_ = m.AddController(c) // and the informer it watches
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for !m.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	waitIdle(c, specs, store)
	stop()
	fmt.Println("manager:", <-done)
	// Output:
	// reconciling web in term 1
	// manager: <nil>
}
