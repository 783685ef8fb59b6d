package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/informer/pgstore"
	"github.com/converge-go/converge/kube"
)

// storeConfig says where the Sites live.
type storeConfig struct {
	// URL: "memory", "etcd://host:port[,host:port...]",
	// "postgres://user@host:port/db" or "kube".
	URL string
	// Kubeconfig and Namespace, for "kube": the kubeconfig's current
	// context and the namespace of the Sites.
	Kubeconfig, Namespace string
	// Prefix, for etcd (the key prefix) and PostgreSQL (the schema, made
	// of its letters and digits).
	Prefix string
}

// opened is a Store of Sites and what to say and do about it.
type opened struct {
	store    informer.Store[string, Site]
	describe string
	close    func()
}

// openStore opens the Store of Sites that c names. Everything else in this
// program is the same whatever it returns.
func openStore(ctx context.Context, c storeConfig) (*opened, error) {
	switch {
	case c.URL == "" || c.URL == "memory":
		s, err := memstore.New[string, Site]()
		if err != nil {
			return nil, err
		}
		return &opened{store: s, describe: "the embedded memory store", close: func() {}}, nil
	case c.URL == "kube":
		return openKube(ctx, c)
	case strings.HasPrefix(c.URL, "etcd://"):
		return openEtcd(ctx, c)
	case strings.HasPrefix(c.URL, "postgres://"), strings.HasPrefix(c.URL, "postgresql://"):
		return openPostgres(ctx, c)
	}
	return nil, fmt.Errorf("--store %q: want memory, etcd://host:port, postgres://user@host:port/db or kube", c.URL)
}

var (
	crdGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	sitesGVR = schema.GroupVersionResource{Group: "example.converge.dev", Version: "v1", Resource: "sites"}
)

// siteCRD is the CustomResourceDefinition of Site, with a status
// subresource: the server keeps a PUT of the object from changing .status
// and bumps metadata.generation only on spec changes.
var siteCRD = map[string]any{
	"spec": map[string]any{
		"group": sitesGVR.Group,
		"scope": "Namespaced",
		"names": map[string]any{"plural": "sites", "singular": "site", "kind": "Site", "listKind": "SiteList"},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"subresources": map[string]any{"status": map[string]any{}},
			"additionalPrinterColumns": []any{
				map[string]any{"name": "Title", "type": "string", "jsonPath": ".spec.title"},
				map[string]any{"name": "Pages", "type": "integer", "jsonPath": ".status.pages"},
				map[string]any{"name": "Observed", "type": "integer", "jsonPath": ".status.observedGeneration"},
			},
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"title": map[string]any{"type": "string"},
						"pages": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					}},
					"status": map[string]any{"type": "object", "properties": map[string]any{
						"observedGeneration": map[string]any{"type": "integer"},
						"path":               map[string]any{"type": "string"},
						"pages":              map[string]any{"type": "integer"},
					}},
				},
			}},
		}},
	},
}

// openKube installs the Site CustomResourceDefinition if the server lacks
// it, waits until the server serves it, and returns a Store of the Sites
// of one namespace (keys are their names).
func openKube(ctx context.Context, c storeConfig) (*opened, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", c.Kubeconfig, err)
	}
	crds, err := kube.New[map[string]any](cfg, crdGVR)
	if err != nil {
		return nil, err
	}
	name := sitesGVR.Resource + "." + sitesGVR.Group
	if _, err := crds.Create(ctx, name, siteCRD); err != nil && !errors.Is(err, informer.ErrConflict) {
		return nil, fmt.Errorf("install the CustomResourceDefinition %s: %w", name, err)
	}
	s, err := kube.New[Site](cfg, sitesGVR, kube.WithNamespace[Site](c.Namespace))
	if err != nil {
		return nil, err
	}
	// A new CRD's resource is served a moment after its create returns:
	// the first List that succeeds says it is.
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, _, err := s.List(wait)
		if err == nil {
			break
		}
		select {
		case <-wait.Done():
			return nil, fmt.Errorf("the server does not serve %s: %w", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return &opened{store: s, describe: fmt.Sprintf("Kubernetes %s, namespace %s", cfg.Host, c.Namespace), close: func() {}}, nil
}

func openEtcd(ctx context.Context, c storeConfig) (*opened, error) {
	hosts := strings.TrimPrefix(c.URL, "etcd://")
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(hosts, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", c.URL, err)
	}
	s, err := etcdstore.New[Site](cli, c.Prefix+"sites/")
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &opened{store: s, describe: fmt.Sprintf("etcd %s, keys under %ssites/", hosts, c.Prefix), close: func() { _ = cli.Close() }}, nil
}

func openPostgres(ctx context.Context, c storeConfig) (*opened, error) {
	pool, err := pgxpool.New(ctx, c.URL)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", c.URL, err)
	}
	schema := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, strings.ToLower(c.Prefix))
	if err := pgstore.Setup(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("--store %q: %w", c.URL, err)
	}
	db, err := pgstore.NewDB(pool, pgstore.WithSchema(schema))
	if err != nil {
		pool.Close()
		return nil, err
	}
	s, err := pgstore.New[Site](db, "sites")
	if err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return &opened{store: s, describe: "PostgreSQL, schema " + schema, close: func() { db.Close(); pool.Close() }}, nil
}
