package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"path/filepath"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/object"
	"github.com/converge-go/converge/reconcile"
)

// Site is the desired state of one static web site: a title and its pages.
// object.Meta gives it a generation, finalizers and a deletion request; on
// Kubernetes they are the custom resource's metadata.generation,
// metadata.finalizers and metadata.deletionTimestamp, and Spec and Status
// are its .spec and .status (a status subresource).
type Site struct {
	object.Meta
	Spec   SiteSpec   `json:"spec"`
	Status SiteStatus `json:"status,omitzero"`
}

// SiteSpec is what a user writes.
type SiteSpec struct {
	Title string   `json:"title"`
	Pages []string `json:"pages,omitempty"`
}

// SiteStatus is what the controller reports.
type SiteStatus struct {
	// ObservedGeneration is the generation the files were last written
	// for: a client waits for it to reach the generation it wrote.
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Path               string `json:"path,omitempty"`
	Pages              int    `json:"pages,omitempty"`
}

// ObjectSpec makes *Site an object.SpecObject: the stores other than
// Kubernetes (whose server does it itself) bump the generation when the
// spec changes, never when only the status does.
func (s *Site) ObjectSpec() any { return s.Spec }

// finalizer keeps a Site whose deletion was requested until its files are
// removed.
const finalizer = "sites.example.converge.dev/files"

// controller renders each Site into root/<key>/index.html. It knows only
// informer.Store and the informer's cache: the same code runs on the
// memory store, etcd, PostgreSQL and the Kubernetes API (see stores.go).
type controller struct {
	store informer.Store[string, Site]
	sites *informer.Informer[string, Site]
	root  string
}

// Reconcile makes root/<key> match the Site of key: with its finalizer in
// place, it writes index.html, then records the generation written in the
// status. Once deletion is requested it removes the directory, then the
// finalizer, which lets the store delete the Site.
func (c *controller) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	site, ok := c.sites.Get(key)
	if !ok {
		return reconcile.Result{}, nil // gone: its files went with the finalizer
	}
	dir := filepath.Join(c.root, key)
	live, err := informer.Finalize(ctx, c.store, key, &site, finalizer, func(context.Context) (bool, error) {
		return true, os.RemoveAll(dir)
	})
	if err != nil || !live {
		return reconcile.Result{}, err
	}
	index := filepath.Join(dir, "index.html")
	page := render(site.Spec)
	if old, err := os.ReadFile(index); err != nil || !bytes.Equal(old, page) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return reconcile.Result{}, err
		}
		if err := os.WriteFile(index, page, 0o644); err != nil {
			return reconcile.Result{}, err
		}
	}
	want := SiteStatus{ObservedGeneration: site.Generation, Path: index, Pages: len(site.Spec.Pages)}
	if site.Status == want {
		return reconcile.Result{}, nil
	}
	// Update reads the Site again and writes at the revision read: a
	// change made meanwhile is a conflict and a retry, never overwritten.
	_, _, err = informer.Update(ctx, c.store, key, func(s *Site) error {
		if s.Generation == site.Generation {
			s.Status = want
		}
		return nil
	})
	return reconcile.Result{}, err
}

func render(s SiteSpec) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<title>%s</title>\n<h1>%[1]s</h1>\n<ul>\n", html.EscapeString(s.Title))
	for _, p := range s.Pages {
		fmt.Fprintf(&b, "<li><a href=%q>%s</a></li>\n", p+".html", html.EscapeString(p))
	}
	b.WriteString("</ul>\n")
	return b.Bytes()
}
