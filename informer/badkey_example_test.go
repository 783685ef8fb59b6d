package informer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/converge-go/converge/informer"
)

type spec struct {
	Replicas int `json:"replicas"`
}

// jsonSource decodes the raw JSON that mapSource holds. A value that does
// not decode is an entry or a Put with Err, never a failed List or Watch.
type jsonSource struct{ raw *mapSource }

func decodeSpec(raw string) (spec, error) {
	var s spec
	err := json.Unmarshal([]byte(raw), &s)
	return s, err
}

func (j jsonSource) List(ctx context.Context) ([]informer.Entry[string, spec], informer.Revision, error) {
	raw, rev, err := j.raw.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := make([]informer.Entry[string, spec], len(raw))
	for i, e := range raw {
		out[i].Key = e.Key
		out[i].Value, out[i].Err = decodeSpec(e.Value)
	}
	return out, rev, nil
}

func (j jsonSource) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, spec]) error) error {
	return j.raw.Watch(ctx, after, func(e informer.Event[string, string]) error {
		out := informer.Event[string, spec]{Type: e.Type, Key: e.Key, Revision: e.Revision}
		if e.Type == informer.Put {
			out.Value, out.Err = decodeSpec(e.Value)
		}
		return emit(out)
	})
}

// A value that does not decode makes its key bad: the informer keeps
// following every other key, reports the bad one, and takes the key back
// at its next good value.
func ExampleInformer_BadKeys() {
	raw := &mapSource{data: map[string]string{}, changed: make(chan struct{})}
	raw.Put("web", `{"replicas": 2}`)
	raw.Put("api", `{"replicas": "three"}`)

	inf, err := informer.New[string, spec]("apps", jsonSource{raw})
	if err != nil {
		log.Fatal(err)
	}
	added := make(chan string)
	_, _ = inf.AddHandler(informer.HandlerFuncs[string, spec]{
		AddFunc: func(k string, v spec, _ bool) { added <- fmt.Sprintf("add %s replicas=%d", k, v.Replicas) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- inf.Run(ctx) }()

	fmt.Println(<-added)
	_ = inf.WaitForSync(ctx)
	for _, b := range inf.BadKeys() {
		fmt.Printf("bad: %s at revision %d: %v\n", b.Key, b.Revision, b.Err)
	}
	raw.Put("api", `{"replicas": 3}`)
	fmt.Println(<-added)
	fmt.Println("bad keys:", len(inf.BadKeys()))

	cancel()
	<-done
	// Output:
	// add web replicas=2
	// bad: api at revision 2: json: cannot unmarshal string into Go struct field spec.replicas of type int
	// add api replicas=3
	// bad keys: 0
}
