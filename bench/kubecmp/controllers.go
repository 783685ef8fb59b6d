package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/reconcile"
)

// The controller both implementations run: a ConfigMap's data[valueKey] is
// its desired value; the reconciler copies it into the annotation
// doneAnnotation with one write, and does nothing when they already agree.
const (
	valueKey       = "v"
	doneAnnotation = "bench.converge.dev/reconciled"
)

// The implementations a run can measure.
const (
	implControllerRuntime = "controller-runtime"
	implConverge          = "converge"      // V = corev1.ConfigMap, the type controller-runtime caches
	implConvergeSlim      = "converge-slim" // V = slimConfigMap, only the fields the reconciler reads
)

var implementations = []string{implControllerRuntime, implConverge, implConvergeSlim}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// reconciled is told of every write of doneAnnotation that succeeded.
type reconciled func(key, value string)

// runner starts one implementation's controller over the ConfigMaps of ns
// and returns when its cache has synced; stop ends it and waits.
type runner func(ctx context.Context, cfg *rest.Config, ns string, done reconciled) (stop func(), err error)

func runnerOf(impl string) (runner, error) {
	switch impl {
	case implControllerRuntime:
		return runControllerRuntime, nil
	case implConverge:
		return runConverge(typedConfigMap{}), nil
	case implConvergeSlim:
		return runConverge(slimAccess{}), nil
	}
	return nil, fmt.Errorf("unknown implementation %q (want one of %v)", impl, implementations)
}

// runControllerRuntime is the controller as controller-runtime's
// documentation writes it, with the manager's defaults (client reads from
// the cache, priority queue, one worker, no client-side rate limit as
// config.GetConfig sets it), metrics and probes off so that no port opens.
func runControllerRuntime(ctx context.Context, cfg *rest.Config, ns string, done reconciled) (func(), error) {
	ctrl.SetLogger(logr.Discard())
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = -1 // what config.GetConfig does with a kubeconfig that sets none
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("bench").Complete(
		reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			want := cm.Data[valueKey]
			if cm.Annotations[doneAnnotation] == want {
				return ctrl.Result{}, nil
			}
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[doneAnnotation] = want
			if err := c.Update(ctx, &cm); err != nil {
				return ctrl.Result{}, err
			}
			done(req.Name, want)
			return ctrl.Result{}, nil
		}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- mgr.Start(ctx) }()
	// The controller's informer starts with the manager; ask for it (the
	// same one) so that WaitForCacheSync waits for its first list.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		cancel()
		return nil, errors.Join(err, <-ended)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("controller-runtime: cache not synced: %v", <-ended)
	}
	return func() { cancel(); <-ended }, nil
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
}

// runConverge is the same controller on converge: an informer over
// kube.Store, a reconciler with the defaults (one worker), which reads the
// cache and writes at the revision it read, as controller-runtime's
// client.Update does.
func runConverge[V any](a access[V]) runner {
	return func(ctx context.Context, cfg *rest.Config, ns string, done reconciled) (func(), error) {
		store, err := kube.New[V](cfg, configMapsGVR, kube.WithNamespace[V](ns))
		if err != nil {
			return nil, err
		}
		inf, err := informer.New("configmaps", informer.Source[string, V](store))
		if err != nil {
			return nil, err
		}
		c, err := reconcile.New("bench", reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
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
			if _, err := store.Update(ctx, key, a.withDone(v, want), informer.Revision(rev)); err != nil {
				return reconcile.Result{}, err
			}
			done(key, want)
			return reconcile.Result{}, nil
		}), reconcile.For(inf))
		if err != nil {
			return nil, err
		}
		mgr, err := reconcile.NewManager(reconcile.ManagerOptions{})
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
