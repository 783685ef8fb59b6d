package httpstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/informer/memstore"
)

// One process serves its store; another reads and writes it through a
// Client, which is an informer.Store: informers and controllers take it as
// they take the store itself.
func Example() {
	type replicas struct {
		Count int `json:"count"`
	}
	// The process that owns the store.
	store, err := memstore.New[string, replicas]()
	if err != nil {
		log.Fatal(err)
	}
	handler, err := httpstore.NewServer(store, httpstore.ServerOptions[replicas]{
		Tokens: map[string]httpstore.Access{"admin-secret": httpstore.ReadWrite, "viewer-secret": httpstore.ReadOnly},
		Validate: func(_ context.Context, _ string, v replicas) error {
			if v.Count < 0 {
				return fmt.Errorf("count %d is negative", v.Count)
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(handler) // http.ListenAndServe(addr, handler) in a real program
	defer srv.Close()

	// Another process.
	ctx := context.Background()
	admin, err := httpstore.NewClient[replicas](srv.URL, httpstore.ClientOptions{Token: "admin-secret"})
	if err != nil {
		panic(err)
	}
	rev, _ := admin.Create(ctx, "web", replicas{Count: 3})
	_, err = admin.Update(ctx, "web", replicas{Count: -1}, rev)
	fmt.Println("invalid:", errors.Is(err, httpstore.ErrInvalid))
	_, _ = admin.Update(ctx, "web", replicas{Count: 5}, rev)
	_, err = admin.Update(ctx, "web", replicas{Count: 4}, rev) // rev is stale now
	fmt.Println("conflict:", errors.Is(err, informer.ErrConflict))

	viewer, _ := httpstore.NewClient[replicas](srv.URL, httpstore.ClientOptions{Token: "viewer-secret"})
	v, _, _, _ := viewer.Get(ctx, "web")
	fmt.Println("count:", v.Count)
	_, err = viewer.Delete(ctx, "web", 0)
	fmt.Println("forbidden:", errors.Is(err, httpstore.ErrForbidden))
	// Output:
	// invalid: true
	// conflict: true
	// count: 5
	// forbidden: true
}
