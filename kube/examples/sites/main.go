// Command sites is a controller that renders each Site object (a title and
// a list of pages) into a directory with an index.html, reports the
// generation it rendered in the Site's status, and removes the directory,
// through a finalizer, before the Site is deleted.
//
// The controller (site.go) knows only informer.Store and an informer's
// cache; which store holds the Sites is a flag:
//
//	sites --store memory                        # the embedded store (default)
//	sites --store etcd://127.0.0.1:2379
//	sites --store postgres://user@host:5432/db
//	sites --store kube --kubeconfig ~/.kube/config --namespace default
//
// With --store kube the Sites are a custom resource (sites.example.converge.dev,
// installed if absent), and kubectl shows them:
//
//	kubectl get sites
//	NAME   TITLE   PAGES   OBSERVED
//	docs   Docs    3       2
//
// By default the program plays a short scene (create a Site, add a page,
// delete it) and prints what the controller did, the same lines on every
// store; "sites [flags] run" runs the controller until interrupted, for
// Sites written by someone else (kubectl, etcdctl, psql):
//
//	sites --store kube --namespace default run &
//	kubectl apply -f - <<EOF
//	apiVersion: example.converge.dev/v1
//	kind: Site
//	metadata: {name: docs}
//	spec: {title: Docs, pages: [intro, install]}
//	EOF
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
)

func main() {
	var c config
	flag.StringVar(&c.store.URL, "store", "memory", "memory, etcd://host:port, postgres://user@host:port/db or kube")
	flag.StringVar(&c.store.Kubeconfig, "kubeconfig", clientcmd.RecommendedHomeFile, "with --store kube: the kubeconfig")
	flag.StringVar(&c.store.Namespace, "namespace", "default", "with --store kube: the namespace of the Sites")
	flag.StringVar(&c.store.Prefix, "prefix", "converge_sites", "with etcd: the key prefix; with PostgreSQL: the schema")
	flag.StringVar(&c.root, "root", filepath.Join(os.TempDir(), "converge-sites"), "the directory the sites are rendered into")
	flag.Parse()
	switch flag.Arg(0) {
	case "", "demo":
	case "run":
		c.serve = true
	default:
		fmt.Fprintf(os.Stderr, "sites: unknown command %q (want demo or run)\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sites:", err)
		os.Exit(1)
	}
}

type config struct {
	store storeConfig
	root  string
	serve bool // run until ctx is done instead of playing the scene
}

// run wires the controller to the store c names and either serves until
// ctx is done or plays the scene.
func run(ctx context.Context, c config, out io.Writer) error {
	o, err := openStore(ctx, c.store)
	if err != nil {
		return err
	}
	defer o.close()
	sites, err := informer.New("sites", informer.Source[string, Site](o.store))
	if err != nil {
		return err
	}
	ctrl, err := reconcile.New("sites", &controller{store: o.store, sites: sites, root: c.root}, reconcile.For(sites))
	if err != nil {
		return err
	}
	mgr, err := reconcile.NewManager(reconcile.ManagerOptions{})
	if err != nil {
		return err
	}
	if err := mgr.AddController(ctrl); err != nil {
		return err
	}
	fmt.Fprintf(out, "sites in %s, rendered into %s\n", o.describe, c.root)
	if c.serve {
		return mgr.Run(ctx)
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := sites.AddHandler(informer.HandlerFuncs[string, Site]{
		AddFunc:    func(string, Site, bool) { notify() },
		UpdateFunc: func(string, Site, Site, bool) { notify() },
		DeleteFunc: func(string, Site) { notify() },
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- mgr.Run(runCtx) }()
	err = scene(ctx, o.store, &watcher{sites: sites, changed: changed}, c.root, out)
	cancel()
	return errors.Join(err, ignoreCanceled(<-ended))
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// watcher waits for the informer's cache to satisfy a condition.
type watcher struct {
	sites   *informer.Informer[string, Site]
	changed chan struct{}
}

// until returns once cond holds, checked after every change the informer
// takes, or fails after 30 seconds, naming what it waited for.
func (w *watcher) until(ctx context.Context, what string, cond func(s *informer.Informer[string, Site]) bool) error {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for !cond(w.sites) {
		select {
		case <-w.changed:
		case <-timeout.C:
			return fmt.Errorf("waited 30s for %s", what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// scene writes desired state as a user would, and waits each time for the
// controller to report it done in the Site's status.
func scene(ctx context.Context, store informer.Store[string, Site], w *watcher, root string, out io.Writer) error {
	const name = "docs"
	rendered := func(gen int64, pages int) func(*informer.Informer[string, Site]) bool {
		return func(s *informer.Informer[string, Site]) bool {
			site, ok := s.Get(name)
			return ok && site.Generation == gen && site.Status.ObservedGeneration == gen && site.Status.Pages == pages
		}
	}
	if _, _, err := informer.CreateOrUpdate(ctx, store, name, func(s *Site) error {
		s.Spec = SiteSpec{Title: "Docs", Pages: []string{"intro", "install"}}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(out, "created docs with 2 pages")
	if err := w.until(ctx, "docs rendered at generation 1", rendered(1, 2)); err != nil {
		return err
	}
	report(out, w, root, name)

	if _, _, err := informer.Update(ctx, store, name, func(s *Site) error {
		s.Spec.Pages = append(s.Spec.Pages, "faq")
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(out, "added the page faq")
	if err := w.until(ctx, "docs rendered at generation 2", rendered(2, 3)); err != nil {
		return err
	}
	report(out, w, root, name)

	if _, _, err := informer.RequestDelete(ctx, store, name); err != nil {
		return err
	}
	fmt.Fprintln(out, "requested the deletion of docs")
	if err := w.until(ctx, "docs deleted", func(s *informer.Informer[string, Site]) bool {
		_, ok := s.Get(name)
		return !ok
	}); err != nil {
		return err
	}
	_, err := os.Stat(filepath.Join(root, name))
	fmt.Fprintf(out, "docs deleted; its directory exists: %v\n", err == nil)
	return nil
}

func report(out io.Writer, w *watcher, root, name string) {
	site, _ := w.sites.Get(name)
	rel, _ := filepath.Rel(root, site.Status.Path)
	fmt.Fprintf(out, "rendered %s: generation %d, %d pages, finalizers %v\n", rel, site.Status.ObservedGeneration, site.Status.Pages, site.Finalizers)
}
