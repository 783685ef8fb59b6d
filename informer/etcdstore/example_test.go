package etcdstore_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/etcdstore"
)

// Widget is the JSON value of a key under /myapp/widgets/.
type Widget struct {
	Replicas int `json:"replicas"`
}

// Desired state under an etcd prefix: an informer follows it, the typed
// helpers write it with compare-and-swap, and anything else that writes
// the prefix (etcdctl, another program) reaches the informer as well. It
// needs an etcd server, so it is compiled but not run.
func ExampleNew() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // the client logs every compacted watch otherwise
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	store, err := etcdstore.New[Widget](cli, "/myapp/widgets/")
	if err != nil {
		log.Fatal(err)
	}
	widgets, err := informer.New("widgets", store)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = widgets.Run(ctx) }()

	// Key "web" is the etcd key /myapp/widgets/web.
	if _, _, err := informer.CreateOrUpdate(ctx, store, "web", func(w *Widget) error {
		w.Replicas = 3
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	// etcdctl put /myapp/widgets/api '{"replicas":2}' reaches widgets'
	// handlers as an add of key "api"; a value that is not a Widget's
	// JSON makes "api" a bad key (widgets.BadKeys), not a stop of the
	// watch.
}
