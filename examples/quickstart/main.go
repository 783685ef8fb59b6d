// Command quickstart is the shortest complete converge controller: it keeps
// a pretend set of replicas at the count the store asks for, on the embedded
// store, under a Manager that serves /healthz and /readyz on loopback.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memory"
	"github.com/converge-go/converge/reconcile"
)

// App is the desired state of one app.
type App struct{ Replicas int }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, "127.0.0.1:8081", time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, addr string, pause time.Duration) error {
	store := memory.New[string, App]()  // desired state: the embedded store
	apps := informer.New("apps", store) // a cache that follows it
	running := map[string]int{}         // observed state (one worker: no lock needed)

	scaler, err := reconcile.New("scaler", reconcile.Func[string](
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
	if err != nil {
		return err
	}
	mgr, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: addr}) // /healthz, /readyz
	if err != nil {
		return err
	}
	if err := mgr.AddInformer(apps); err != nil {
		return err
	}
	if err := mgr.AddController(scaler); err != nil {
		return err
	}

	ctx, stop := context.WithCancel(ctx)
	go func() { // someone changes the desired state, then we stop
		for _, replicas := range []int{3, 5, 0} {
			if replicas > 0 {
				store.Put("web", App{Replicas: replicas})
			} else {
				store.Delete("web")
			}
			time.Sleep(pause)
		}
		stop()
	}()
	return mgr.Run(ctx)
}
