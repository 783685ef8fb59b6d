// Command quickstart is the shortest complete converge controller: it keeps
// a pretend set of replicas at the count the store asks for.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/reconcile"
)

func main() {
	if err := run(context.Background(), os.Stdout, time.Second); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, pause time.Duration) error {
	type App struct{ Replicas int }           // the desired state of one app
	store, err := memstore.New[string, App]() // desired state: the embedded store
	if err != nil {
		return err
	}
	apps, err := informer.New("apps", store) // a cache that follows it
	if err != nil {
		return err
	}
	running := map[string]int{} // observed state (one worker: no lock needed)
	scaler, err := reconcile.New("scaler", reconcile.Func(
		func(ctx context.Context, name string) (reconcile.Result, error) {
			app, ok := apps.Get(name) // a key, never an event: read the desired state
			switch {
			case !ok && running[name] > 0:
				fmt.Fprintf(out, "%s: deleted, stopping %d replicas\n", name, running[name])
				delete(running, name)
			case ok && running[name] != app.Replicas:
				fmt.Fprintf(out, "%s: scaling %d -> %d\n", name, running[name], app.Replicas)
				running[name] = app.Replicas
			}
			return reconcile.Result{}, nil // done until the app changes
		}), reconcile.For(apps))
	mgr, err2 := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0"}) // /healthz, /readyz
	if err := errors.Join(err, err2); err != nil {
		return err
	}
	if err := mgr.AddController(scaler); err != nil { // and the informer it watches
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	go func() { // someone changes the desired state, then we stop
		store.Put("web", App{Replicas: 3})
		time.Sleep(pause)
		store.Put("web", App{Replicas: 5})
		time.Sleep(pause)
		_, _ = store.Delete(ctx, "web", 0)
		time.Sleep(pause)
		stop()
	}()
	return mgr.Run(ctx) // until ctx is done; wire SIGTERM in with signal.NotifyContext
}
