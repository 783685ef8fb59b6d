package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func objectName(i int) string { return fmt.Sprintf("cm-%05d", i) }

// noRateLimit returns a copy of cfg without client-go's default client-side
// limit of 5 requests per second: the server's priority and fairness is the
// limit, as for both controllers.
func noRateLimit(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return cfg
}

// prepare creates a fresh namespace with n objects of resource, each with
// the value "0" and a few other fields a real one has (a label, a small
// payload), from 16 goroutines.
func prepare(ctx context.Context, cfg *rest.Config, resource string, n int) (string, error) {
	cfg = noRateLimit(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	gvr, err := resourceGVR(resource)
	if err != nil {
		return "", err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "kc-" + hex.EncodeToString(b)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create namespace %s: %w", ns, err)
	}
	ri := dc.Resource(gvr).Namespace(ns)
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if _, err := ri.Create(ctx, newObject(resource, ns, i), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s/%s: %w", ns, objectName(i), err)
					return
				}
			}
		})
	}
	var first error
feed:
	for i := range n {
		select {
		case next <- i:
		case first = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		select {
		case first = <-errs:
		default:
		}
	}
	return ns, first
}

// cleanUp deletes the objects of ns (its resource's and its Leases) and ns
// itself, so that the server's watch cache does not grow from run to run
// (without a namespace controller, deleting the namespace alone would
// leave them).
func cleanUp(ctx context.Context, cfg *rest.Config, resource, ns string) error {
	cfg = noRateLimit(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr, err := resourceGVR(resource)
	if err != nil {
		return err
	}
	// The server gives up on a DELETE of 10k objects after its request
	// timeout, having deleted some: ask again.
	for try := 1; ; try++ {
		err := dc.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err == nil {
			break
		}
		if try == 5 {
			return fmt.Errorf("delete %s of %s: %w", gvr.Resource, ns, err)
		}
	}
	if err := cs.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete leases of %s: %w", ns, err)
	}
	return cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// scraper reads the server's own request counters from /metrics.
type scraper struct {
	c    *http.Client
	host string
}

func newScraper(cfg *rest.Config) (*scraper, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &scraper{c: c, host: strings.TrimSuffix(cfg.Host, "/")}, nil
}

// requests is what the server counted of one resource: its
// apiserver_request_total by verb, and the time it spent on PUTs
// (apiserver_request_duration_seconds, from the request's arrival to its
// answer: admission, storage and etcd's write).
type requests struct {
	byVerb     map[string]int64
	putSeconds float64
	puts       int64
}

func (r requests) total() int64 {
	var n int64
	for _, v := range r.byVerb {
		n += v
	}
	return n
}

// requests returns the server's counts of resource (every subresource,
// code and scope). A watch is counted when it ends, so an open one is not
// in the count.
func (s *scraper) requests(ctx context.Context, resource string) (requests, error) {
	out := requests{byVerb: map[string]int64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.host+"/metrics", nil)
	if err != nil {
		return out, err
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		var v float64
		switch name {
		case "apiserver_request_total", "apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count":
			sp := strings.LastIndexByte(line, ' ')
			if v, err = strconv.ParseFloat(line[sp+1:], 64); err != nil {
				return out, fmt.Errorf("/metrics: %q: %w", line, err)
			}
		default:
			continue
		}
		verb := label(line, "verb")
		switch {
		case name == "apiserver_request_total":
			out.byVerb[verb] += int64(v)
		case verb != "PUT":
		case name == "apiserver_request_duration_seconds_sum":
			out.putSeconds += v
		default:
			out.puts += int64(v)
		}
	}
	return out, sc.Err()
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}
