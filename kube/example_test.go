package kube_test

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/kube"
	"github.com/converge-go/converge/object"
)

// Job is a custom resource as a converge value: object.Meta maps onto its
// metadata (finalizers, deletionTimestamp, generation), Spec and Status onto
// .spec and .status, and Metadata carries its labels.
type Job struct {
	object.Meta
	Metadata struct {
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec   JobSpec   `json:"spec"`
	Status JobStatus `json:"status,omitzero"`
}

type JobSpec struct {
	Image string `json:"image"`
}

type JobStatus struct {
	Done bool `json:"done,omitempty"`
}

// A Store over a custom resource in one namespace, with a label selector,
// followed by an informer and written with informer's helpers; the same
// code runs on every converge store.
func Example() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := kube.New[Job](cfg, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "jobs"},
		kube.WithNamespace[Job]("default"),
		kube.WithLabelSelector[Job]("team=batch"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	_, _, err = informer.CreateOrUpdate(ctx, jobs, "nightly", func(j *Job) error {
		j.Metadata.Labels = map[string]string{"team": "batch"}
		j.Spec.Image = "registry.example.com/nightly:1"
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	inf, err := informer.New("jobs", informer.Source[string, Job](jobs))
	if err != nil {
		log.Fatal(err)
	}
	if err := inf.Run(ctx); err != nil { // until ctx is done
		log.Fatal(err)
	}
}

// A Store of a built-in resource that reads its lists, watches and gets as
// protobuf, decoded by the generated code of k8s.io/api, as client-go's
// typed clients read; writes stay JSON.
func ExampleWithProtobuf() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	configMaps, err := kube.New[corev1.ConfigMap](cfg, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		kube.WithNamespace[corev1.ConfigMap]("default"),
		kube.WithProtobuf[corev1.ConfigMap]())
	if err != nil {
		log.Fatal(err)
	}
	inf, err := informer.New("configmaps", informer.Source[string, corev1.ConfigMap](configMaps))
	if err != nil {
		log.Fatal(err)
	}
	if err := inf.Run(context.Background()); err != nil { // until the context is done
		log.Fatal(err)
	}
}
