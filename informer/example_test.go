package informer_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/converge-go/converge/informer"
)

// mapSource is a Source over a map: how to write one for your own store.
// Every write bumps the revision and is kept in a log, which Watch replays
// from the revision asked for and then follows.
type mapSource struct {
	mu      sync.Mutex
	log     []informer.Event[string, string] // log[i] has revision i+1
	data    map[string]string
	changed chan struct{} // closed and replaced on every write
}

func (s *mapSource) Put(k, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[k] = v
	s.log = append(s.log, informer.Event[string, string]{Type: informer.Put, Key: k, Value: v, Revision: informer.Revision(len(s.log) + 1)})
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *mapSource) List(ctx context.Context) ([]informer.Entry[string, string], informer.Revision, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []informer.Entry[string, string]
	for k, v := range s.data {
		out = append(out, informer.Entry[string, string]{Key: k, Value: v})
	}
	return out, informer.Revision(len(s.log)), nil
}

func (s *mapSource) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, string]) error) error {
	for {
		s.mu.Lock()
		if int(after) > len(s.log) { // a revision this store never had
			s.mu.Unlock()
			return informer.ErrRevisionExpired
		}
		pending, changed := s.log[after:], s.changed
		s.mu.Unlock()
		for _, ev := range pending {
			if err := emit(ev); err != nil {
				return err
			}
			after = ev.Revision
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// An informer over a custom Source: wait for the first list, then follow
// changes.
func Example() {
	src := &mapSource{data: map[string]string{}, changed: make(chan struct{})}
	src.Put("web", "v1")

	inf, err := informer.New[string, string]("apps", src)
	if err != nil {
		log.Fatal(err)
	}
	seen := make(chan string)
	_, _ = inf.AddHandler(informer.HandlerFuncs[string, string]{
		AddFunc:    func(k, v string, initial bool) { seen <- fmt.Sprintf("add %s=%s initial=%v", k, v, initial) },
		UpdateFunc: func(k, old, v string, _ bool) { seen <- fmt.Sprintf("update %s: %s -> %s", k, old, v) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- inf.Run(ctx) }()

	fmt.Println(<-seen)
	_ = inf.WaitForSync(ctx)
	src.Put("web", "v2")
	fmt.Println(<-seen)
	v, _ := inf.Get("web")
	fmt.Println("cached:", v)

	cancel()
	<-done
	// Output:
	// add web=v1 initial=true
	// update web: v1 -> v2
	// cached: v2
}
