package kube_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/kube"
)

// BenchmarkListConfigMaps lists and decodes the ConfigMaps of a namespace
// on the real server, as an informer's first sync does (a new Store each
// time: discovery, then a list at resourceVersion 0, which the watch
// cache answers in one page), as JSON and as protobuf, beside client-go's
// typed client asking for protobuf (what controller-runtime's cache lists
// with). KUBE_BENCH_OBJECTS sets the count (default 10000); the objects
// are bench/kubecmp's. cpu-ms/op is this process's CPU (the client's),
// the rest of the time is the server's.
//
//	go -C kube test -run '^$' -bench ListConfigMaps -benchtime 10x .
func BenchmarkListConfigMaps(b *testing.B) {
	cfg := restConfig(b)
	n := 10000
	if v := os.Getenv("KUBE_BENCH_OBJECTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "KUBE_BENCH_OBJECTS")
	}
	ns := namespace(b, cfg)
	populate(b, cfg, ns, n)

	storeList := func(opts ...kube.Option[corev1.ConfigMap]) func(ctx context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			s, err := kube.New[corev1.ConfigMap](cfg, configMapsGVR, append(opts, kube.WithNamespace[corev1.ConfigMap](ns))...)
			if err != nil {
				return 0, err
			}
			entries, _, err := s.List(ctx)
			return len(entries), err
		}
	}
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	pcfg.QPS, pcfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(pcfg)
	require.NoError(b, err)

	for _, c := range []struct {
		name string
		list func(ctx context.Context) (int, error)
	}{
		{"store-json", storeList()},
		{"store-protobuf", storeList(kube.WithProtobuf[corev1.ConfigMap]())},
		{"client-go-protobuf", func(ctx context.Context) (int, error) {
			l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				got, err := c.list(b.Context())
				require.NoError(b, err)
				require.Equal(b, n, got)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// populate creates n ConfigMaps in ns from 16 goroutines, as
// bench/kubecmp does.
func populate(b *testing.B, cfg *rest.Config, ns string, n int) {
	s, err := kube.New[corev1.ConfigMap](cfg, configMapsGVR, kube.WithNamespace[corev1.ConfigMap](ns))
	require.NoError(b, err)
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				cm := corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
					Data:       map[string]string{"v": "0", "config.yaml": "replicas: 3\nimage: registry.example.com/app:1.0\n"},
				}
				if _, err := s.Create(b.Context(), "cm-"+strconv.Itoa(i), cm); err != nil {
					errs <- err
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
	require.NoError(b, first)
}
