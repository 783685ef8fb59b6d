package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/informer"
)

// serveAPI serves a tiny API over the stores until ctx is done: the part of
// the Kubernetes API server this example needs.
//
//	PUT    /replicasets/NAME   {"replicas": 3, "command": ["replicaset", "worker"]}
//	GET    /replicasets        every ReplicaSet, with status and pods
//	GET    /replicasets/NAME   one
//	GET    /replicasets/NAME/describe   as `kubectl describe`, with its events (text)
//	DELETE /replicasets/NAME   request its deletion (202): the controller deletes
//	                           its pods, then removes its finalizer, which deletes it
//	GET    /pods               every pod
func serveAPI(ctx context.Context, ln net.Listener, st *stores) error {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /replicasets/{name}", func(w http.ResponseWriter, r *http.Request) {
		var spec ReplicaSetSpec
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			http.Error(w, "want a spec like {\"replicas\": 3, \"command\": [\"replicaset\", \"worker\"]}: "+err.Error(), http.StatusBadRequest)
			return
		}
		name := r.PathValue("name")
		if err := apply(r.Context(), st.replicaSets, name, spec); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, errDeleting) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeView(w, r, st, name)
	})
	mux.HandleFunc("GET /replicasets/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeView(w, r, st, r.PathValue("name"))
	})
	mux.HandleFunc("GET /replicasets/{name}/describe", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		if err := describe(r.Context(), &b, st, r.PathValue("name"), time.Now()); err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(b.Bytes())
	})
	mux.HandleFunc("GET /replicasets", func(w http.ResponseWriter, r *http.Request) {
		views, err := viewAll(r.Context(), st, "")
		writeJSON(w, views, err)
	})
	mux.HandleFunc("DELETE /replicasets/{name}", func(w http.ResponseWriter, r *http.Request) {
		// The controller's finalizer keeps it until its pods are gone.
		if _, _, err := informer.RequestDelete(r.Context(), st.replicaSets, r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		pods, err := listPods(r.Context(), st, "")
		writeJSON(w, pods, err)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// rsView is a ReplicaSet as the API shows it: with its name and pods.
type rsView struct {
	Name string `json:"name"`
	ReplicaSet
	Pods []podView `json:"pods"`
}

// podView is a pod as the API shows it, with the time left until a
// crash-looping process restarts.
type podView struct {
	Name string `json:"name"`
	Pod
	NextRestartIn string `json:"nextRestartIn,omitempty"`
}

func writeView(w http.ResponseWriter, r *http.Request, st *stores, name string) {
	views, err := viewAll(r.Context(), st, name)
	if err == nil && len(views) == 0 {
		http.Error(w, "no such replicaset", http.StatusNotFound)
		return
	}
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	writeJSON(w, views[0], nil)
}

// viewAll returns the ReplicaSet named only, or all if only is "".
func viewAll(ctx context.Context, st *stores, only string) ([]rsView, error) {
	entries, _, err := st.replicaSets.List(ctx)
	if err != nil {
		return nil, err
	}
	views := []rsView{}
	for _, e := range entries {
		if only != "" && e.Key != only {
			continue
		}
		pods, err := listPods(ctx, st, e.Key)
		if err != nil {
			return nil, err
		}
		views = append(views, rsView{Name: e.Key, ReplicaSet: e.Value, Pods: pods})
	}
	slices.SortFunc(views, func(a, b rsView) int { return strings.Compare(a.Name, b.Name) })
	return views, nil
}

// listPods returns the pods owned by owner, or all if owner is "", by name.
func listPods(ctx context.Context, st *stores, owner string) ([]podView, error) {
	entries, _, err := st.pods.List(ctx)
	if err != nil {
		return nil, err
	}
	pods := []podView{}
	for _, e := range entries {
		if owner != "" && e.Value.Spec.Owner != owner {
			continue
		}
		v := podView{Name: e.Key, Pod: e.Value}
		if t := e.Value.Status.NextRestartAt; !t.IsZero() && e.Value.Status.Phase == PhaseWaiting {
			v.NextRestartIn = max(0, time.Until(t)).Round(time.Millisecond).String()
		}
		pods = append(pods, v)
	}
	slices.SortFunc(pods, func(a, b podView) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// writeError answers 404 for a ReplicaSet that does not exist, 500 for
// any other error.
func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, informer.ErrNotFound) {
		http.Error(w, "no such replicaset", http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
