package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/reconcile"
)

// The controller both implementations run: a ConfigMap's data[valueKey] is
// its desired value; the reconciler copies it into the annotation
// doneAnnotation with one write, and does nothing when they already agree.
// Over the custom resource (resourceCRD), spec.v is the desired value and
// status.observed the annotation's counterpart.
const (
	valueKey       = "v"
	doneAnnotation = "bench.converge.dev/reconciled"
)

// The implementations a run can measure.
const (
	implControllerRuntime = "controller-runtime"
	implConverge          = "converge"          // V = corev1.ConfigMap, the type controller-runtime caches
	implConvergeSlim      = "converge-slim"     // V = slimConfigMap, only the fields the reconciler reads
	implConvergeProtobuf  = "converge-protobuf" // V = corev1.ConfigMap, lists, watches and gets read as protobuf
)

var implementations = []string{implControllerRuntime, implConverge, implConvergeSlim, implConvergeProtobuf}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// reconciled is told of every write of the reconciler that succeeded.
type reconciled func(key, value string)

// runSpec is what a runner runs: the controller over the objects of one
// resource in one namespace.
type runSpec struct {
	ns       string
	resource string // one of resources
	workers  int    // concurrent reconciles; 0: the library's default (1 for both)
	// election, if set, runs the controller only while it holds a Lease
	// in ns; the cache is synced on every replica.
	election *election
	// entered, if set, is called at the start of every reconcile.
	entered func()
	done    reconciled
}

// election is one candidate's leader election: both libraries elect over
// a coordination.k8s.io/v1 Lease.
type election struct {
	id                  string
	lease, renew, retry time.Duration
}

// leaseName is the Lease both libraries elect over, one per namespace.
const leaseName = "kubecmp-leader"

// runner starts one implementation's controller and returns when its cache
// has synced; stop ends it and waits.
type runner func(ctx context.Context, cfg *rest.Config, spec runSpec) (stop func(), err error)

func runnerOf(impl, resource string) (runner, error) {
	if _, err := resourceGVR(resource); err != nil {
		return nil, err
	}
	crd := isCRD(resource)
	status := resource == resourceCRD
	switch {
	case impl == implControllerRuntime && crd:
		return runControllerRuntime(crBenchItems(status)), nil
	case impl == implControllerRuntime:
		return runControllerRuntime(crConfigMaps), nil
	case impl == implConverge && crd:
		return runConverge(typedBenchItem{status: status}), nil
	case impl == implConverge:
		return runConverge(typedConfigMap{}), nil
	case impl == implConvergeSlim && !crd:
		return runConverge(slimAccess{}), nil
	case impl == implConvergeProtobuf && !crd:
		return runConverge(typedConfigMap{}, kube.WithProtobuf[corev1.ConfigMap]()), nil
	case impl == implConvergeProtobuf:
		return nil, fmt.Errorf("%s runs over %s only: the server serves custom resources as JSON", impl, resourceConfigMaps)
	case impl == implConvergeSlim:
		return nil, fmt.Errorf("%s runs over %s only: a slim custom resource's update would drop the spec fields it does not declare", impl, resourceConfigMaps)
	}
	return nil, fmt.Errorf("unknown implementation %q (want one of %v)", impl, implementations)
}

// crKind is the controller's part that depends on the resource, written
// with controller-runtime.
type crKind struct {
	object func() client.Object
	// reconcile brings key's object to its value with c and returns the
	// value written ("" if there was nothing to write).
	reconcile func(ctx context.Context, c client.Client, key types.NamespacedName) (string, error)
}

var crConfigMaps = crKind{
	object: func() client.Object { return &corev1.ConfigMap{} },
	reconcile: func(ctx context.Context, c client.Client, key types.NamespacedName) (string, error) {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, key, &cm); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		want := cm.Data[valueKey]
		if cm.Annotations[doneAnnotation] == want {
			return "", nil
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[doneAnnotation] = want
		return want, c.Update(ctx, &cm)
	},
}

// crBenchItems writes the value into the status with status, else into
// the annotation.
func crBenchItems(status bool) crKind {
	return crKind{
		object: func() client.Object { return &BenchItem{} },
		reconcile: func(ctx context.Context, c client.Client, key types.NamespacedName) (string, error) {
			var b BenchItem
			if err := c.Get(ctx, key, &b); err != nil {
				return "", client.IgnoreNotFound(err)
			}
			want := b.Spec.V
			if status {
				if b.Status.Observed == want {
					return "", nil
				}
				b.Status.Observed = want
				return want, c.Status().Update(ctx, &b)
			}
			if b.Annotations[doneAnnotation] == want {
				return "", nil
			}
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[doneAnnotation] = want
			return want, c.Update(ctx, &b)
		},
	}
}

// crScheme is client-go's scheme with the BenchItem types.
func crScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	s.AddKnownTypes(benchItemsGV, &BenchItem{}, &BenchItemList{})
	metav1.AddToGroupVersion(s, benchItemsGV)
	return s, nil
}

// runControllerRuntime is the controller as controller-runtime's
// documentation writes it, with the manager's defaults (client reads from
// the cache, priority queue, one worker, no client-side rate limit as
// config.GetConfig sets it), metrics and probes off so that no port opens.
// With an election, its leader election on a Lease (the default lock).
func runControllerRuntime(k crKind) runner {
	return func(ctx context.Context, cfg *rest.Config, spec runSpec) (func(), error) {
		ctrl.SetLogger(logr.Discard())
		cfg = rest.CopyConfig(cfg)
		if cfg.QPS == 0 {
			cfg.QPS = -1 // what config.GetConfig does with a kubeconfig that sets none
		}
		scheme, err := crScheme()
		if err != nil {
			return nil, err
		}
		opts := ctrl.Options{
			Scheme:                 scheme,
			Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{spec.ns: {}}},
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		}
		if e := spec.election; e != nil {
			opts.LeaderElection = true
			opts.LeaderElectionID = leaseName
			opts.LeaderElectionNamespace = spec.ns
			opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &e.lease, &e.renew, &e.retry
		}
		mgr, err := ctrl.NewManager(cfg, opts)
		if err != nil {
			return nil, err
		}
		c := mgr.GetClient()
		b := ctrl.NewControllerManagedBy(mgr).For(k.object()).Named("bench")
		if spec.workers > 0 {
			b = b.WithOptions(controller.Options{MaxConcurrentReconciles: spec.workers})
		}
		err = b.Complete(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			if spec.entered != nil {
				spec.entered()
			}
			wrote, err := k.reconcile(ctx, c, req.NamespacedName)
			if err != nil || wrote == "" {
				return ctrl.Result{}, err
			}
			spec.done(req.Name, wrote)
			return ctrl.Result{}, nil
		}))
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() { ended <- mgr.Start(ctx) }()
		// The controller's informer starts with the manager, on every
		// replica (the cache is not subject to the election); ask for it
		// (the same one) so that WaitForCacheSync waits for its first list.
		if _, err := mgr.GetCache().GetInformer(ctx, k.object()); err != nil {
			cancel()
			return nil, errors.Join(err, <-ended)
		}
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			cancel()
			return nil, fmt.Errorf("controller-runtime: cache not synced: %v", <-ended)
		}
		return func() { cancel(); <-ended }, nil
	}
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, r ctrl.Request) (ctrl.Result, error) {
	return f(ctx, r)
}

// access is what the converge controller needs of its value type.
type access[V any] interface {
	value(v V) string
	done(v V) string
	// withDone returns v with doneAnnotation set, sharing nothing that
	// the cache holds.
	withDone(v V, value string) V
	resourceVersion(v V) string
	// statusOnly reports whether withDone changes only the status: the
	// controller then writes with kube.Store.UpdateStatus, one request,
	// as controller-runtime's Status().Update.
	statusOnly() bool
}

// runConverge is the same controller on converge: an informer over
// kube.Store, a reconciler with the defaults (one worker), which reads the
// cache and writes at the revision it read, as controller-runtime's
// client.Update does. With an election, a Manager with kube.Lock over a
// Lease.
func runConverge[V any](a access[V], storeOpts ...kube.Option[V]) runner {
	return func(ctx context.Context, cfg *rest.Config, spec runSpec) (func(), error) {
		gvr, err := resourceGVR(spec.resource)
		if err != nil {
			return nil, err
		}
		store, err := kube.New[V](cfg, gvr, append(storeOpts, kube.WithNamespace[V](spec.ns))...)
		if err != nil {
			return nil, err
		}
		write := store.Update
		if a.statusOnly() {
			write = store.UpdateStatus
		}
		inf, err := informer.New(gvr.Resource, informer.Source[string, V](store))
		if err != nil {
			return nil, err
		}
		opts := []reconcile.Option{reconcile.For(inf)}
		if spec.workers > 0 {
			opts = append(opts, reconcile.WithWorkers(spec.workers))
		}
		c, err := reconcile.New("bench", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
			if spec.entered != nil {
				spec.entered()
			}
			v, ok := inf.Get(key)
			if !ok {
				return reconcile.Result{}, nil
			}
			want := a.value(v)
			if a.done(v) == want {
				return reconcile.Result{}, nil
			}
			rev, err := strconv.ParseUint(a.resourceVersion(v), 10, 64)
			if err != nil {
				return reconcile.Result{}, reconcile.Terminal(err)
			}
			if _, err := write(ctx, key, a.withDone(v, want), informer.Revision(rev)); err != nil {
				return reconcile.Result{}, err
			}
			spec.done(key, want)
			return reconcile.Result{}, nil
		}), opts...)
		if err != nil {
			return nil, err
		}
		mo := reconcile.ManagerOptions{Logger: slog.New(slog.DiscardHandler)} // as controller-runtime's, discarded
		if e := spec.election; e != nil {
			lock, err := kube.NewLock(cfg, spec.ns, leaseName)
			if err != nil {
				return nil, err
			}
			mo.Lock = lock
			mo.Leader = leader.Config{Identity: e.id, LeaseDuration: e.lease, RenewDeadline: e.renew, RetryPeriod: e.retry}
		}
		mgr, err := reconcile.NewManager(mo)
		if err != nil {
			return nil, err
		}
		if err := mgr.AddController(c); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() { ended <- mgr.Run(ctx) }()
		if err := inf.WaitForSync(ctx); err != nil {
			cancel()
			return nil, errors.Join(err, <-ended)
		}
		return func() { cancel(); <-ended }, nil
	}
}

type typedConfigMap struct{}

func (typedConfigMap) statusOnly() bool                          { return false }
func (typedConfigMap) value(v corev1.ConfigMap) string           { return v.Data[valueKey] }
func (typedConfigMap) done(v corev1.ConfigMap) string            { return v.Annotations[doneAnnotation] }
func (typedConfigMap) resourceVersion(v corev1.ConfigMap) string { return v.ResourceVersion }
func (typedConfigMap) withDone(v corev1.ConfigMap, value string) corev1.ConfigMap {
	v.Annotations = withEntry(v.Annotations, doneAnnotation, value)
	return v
}

// slimConfigMap is the ConfigMap as a converge controller would declare
// it for this job: what it reads and writes, nothing else cached.
type slimConfigMap struct {
	Metadata struct {
		ResourceVersion string            `json:"resourceVersion,omitempty"`
		Labels          map[string]string `json:"labels,omitempty"`
		Annotations     map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Data map[string]string `json:"data,omitempty"`
}

type slimAccess struct{}

func (slimAccess) statusOnly() bool                       { return false }
func (slimAccess) value(v slimConfigMap) string           { return v.Data[valueKey] }
func (slimAccess) done(v slimConfigMap) string            { return v.Metadata.Annotations[doneAnnotation] }
func (slimAccess) resourceVersion(v slimConfigMap) string { return v.Metadata.ResourceVersion }
func (slimAccess) withDone(v slimConfigMap, value string) slimConfigMap {
	v.Metadata.Annotations = withEntry(v.Metadata.Annotations, doneAnnotation, value)
	return v
}

// withEntry returns a copy of m with k set to v: the cached map stays as
// the cache has it.
func withEntry(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	maps.Copy(out, m)
	out[k] = v
	return out
}

// typedBenchItem keeps the value in the status with status, else in the
// annotation.
type typedBenchItem struct{ status bool }

func (t typedBenchItem) statusOnly() bool                 { return t.status }
func (typedBenchItem) value(v BenchItem) string           { return v.Spec.V }
func (typedBenchItem) resourceVersion(v BenchItem) string { return v.ResourceVersion }
func (t typedBenchItem) done(v BenchItem) string {
	if t.status {
		return v.Status.Observed
	}
	return v.Annotations[doneAnnotation]
}

func (t typedBenchItem) withDone(v BenchItem, value string) BenchItem {
	if t.status {
		v.Status.Observed = value
	} else {
		v.Annotations = withEntry(v.Annotations, doneAnnotation, value)
	}
	return v
}
