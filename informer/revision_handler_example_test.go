package informer_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/converge-go/converge/informer"
)

// revLogger logs which store revision each change it is given comes from:
// ChangeRevision is called right before each of its other methods.
type revLogger struct {
	rev  informer.Revision
	done chan struct{}
}

func (h *revLogger) ChangeRevision(rev informer.Revision) { h.rev = rev }

func (h *revLogger) OnAdd(key, v string, initialList bool) {
	fmt.Printf("add %s=%s at revision %d\n", key, v, h.rev)
}

func (h *revLogger) OnUpdate(key, _, v string, _ bool) {
	fmt.Printf("update %s=%s at revision %d\n", key, v, h.rev)
	close(h.done)
}

func (h *revLogger) OnDelete(key, _ string) {}

// A handler that is also a RevisionHandler learns the store revision of
// every change it is given: the list's for the initial adds, each event's
// own for the watch's changes.
func ExampleRevisionHandler() {
	src := &mapSource{data: map[string]string{}, changed: make(chan struct{})}
	src.Put("a", "1")
	src.Put("b", "1")
	inf, err := informer.New[string, string]("example", src, informer.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		log.Fatal(err)
	}
	h := &revLogger{done: make(chan struct{})}
	if _, err := inf.AddHandler(h); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = inf.Run(ctx) }()
	if err := inf.WaitForSync(ctx); err != nil {
		panic(err)
	}
	src.Put("a", "2")
	<-h.done
	cancel()
	<-stopped
	// Unordered output:
	// add a=1 at revision 2
	// add b=1 at revision 2
	// update a=2 at revision 3
}
