package bench

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

func init() {
	recImpls = append(recImpls, recImpl{name: "controller-runtime", newPipeline: newControllerRuntimeRec})
}

// controllerRuntimeRec: sharedInformer → controller-runtime's controller
// (controller.NewTypedUnmanaged with default options: its priority queue,
// its reconcile and workqueue metrics on the global registry, which it
// cannot turn off) watching the informer through source.TypedInformer and
// handler.TypedEnqueueRequestForObject, the handler source.Kind installs.
// The reconciler reads the object from the informer's indexer by
// namespace/name, as controller-runtime's cache reader does, without its
// DeepCopy.
type controllerRuntimeRec struct {
	*sharedInformer
	t *recTracker
	// The controller stops first, then the informer, as a manager does.
	stopCtl, stopInf context.CancelFunc
	ctlDone, infDone chan struct{}
	runErr           error // of the controller's Start; read after ctlDone
}

func newControllerRuntimeRec(o *informerObjects, t *recTracker, updates int) recPipeline {
	return &controllerRuntimeRec{sharedInformer: newSharedInformer(o, updates), t: t}
}

func (p *controllerRuntimeRec) start(workers int) {
	rec := crreconcile.TypedFunc[crreconcile.Request](func(_ context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		p.t.reconciled(p.get(req.Namespace + "/" + req.Name))
		return crreconcile.Result{}, nil
	})
	c, err := controller.NewTypedUnmanaged("bench-reconcile", controller.TypedOptions[crreconcile.Request]{
		Reconciler:              rec,
		MaxConcurrentReconciles: workers,
		SkipNameValidation:      new(true), // a fresh controller per run, same name
	})
	if err != nil {
		panic(err)
	}
	src := &syncingInformerSource{
		TypedInformer: &source.TypedInformer[client.Object, crreconcile.Request]{
			Informer: p.inf,
			Handler:  &handler.TypedEnqueueRequestForObject[client.Object]{},
		},
		synced: p.inf.HasSyncedChecker().Done(),
	}
	if err := c.Watch(src); err != nil {
		panic(err)
	}
	infCtx, stopInf := context.WithCancel(context.Background())
	ctlCtx, stopCtl := context.WithCancel(context.Background())
	p.stopInf, p.stopCtl = stopInf, stopCtl
	p.infDone, p.ctlDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.infDone)
		p.inf.RunWithContext(infCtx)
	}()
	go func() {
		defer close(p.ctlDone)
		p.runErr = c.Start(ctlCtx)
	}()
}

func (p *controllerRuntimeRec) stop() {
	p.stopCtl()
	<-p.ctlDone
	p.stopInf()
	<-p.infDone
}

func (p *controllerRuntimeRec) check() error {
	if p.runErr != nil {
		return fmt.Errorf("controller: %w", p.runErr)
	}
	return p.sharedInformer.check()
}

// syncingInformerSource makes the controller start its workers only once the
// informer has synced, as source.Kind does over a manager's cache, but
// waiting on a channel rather than polling every 100 ms as the cache's
// WaitForCacheSync does.
type syncingInformerSource struct {
	*source.TypedInformer[client.Object, crreconcile.Request]
	synced <-chan struct{}
}

var _ source.TypedSyncingSource[crreconcile.Request] = (*syncingInformerSource)(nil)

func (s *syncingInformerSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) error {
	return s.TypedInformer.Start(ctx, q)
}

func (s *syncingInformerSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
