// Package ctl is the cluster example's kubectl: the same verbs and, as far
// as the example's objects go, the same output and errors. It talks to the
// control plane through the store protocol (apiserver.NewStores), so every
// write goes through the API server's admission.
package ctl

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
)

const usage = `usage: cluster ctl [--api URL] [--token T] [-n NAMESPACE] VERB ...

  apply -f FILE                         create or update the objects of a manifest ("-": stdin)
  get KIND[,KIND...] [NAME] [-o wide|yaml|json] [-w] [-A]
  describe KIND/NAME | KIND NAME
  delete KIND/NAME [--cascade=background|foreground|orphan]
  scale KIND/NAME --replicas=N
  cordon NODE | uncordon NODE | drain NODE [--force] [--timeout 60s]
  logs POD [-c CONTAINER]
  rollout status|history|undo deploy/NAME [--to-revision=N] [--timeout 5m]

KIND: deployments (deploy), replicasets (rs), pods (po), nodes (no), leases.`

// cli is one invocation's connection and output.
type cli struct {
	st             api.Stores
	namespace      string
	stdout, stderr io.Writer
}

// Main runs `cluster ctl ARGS` until it is done or interrupted (SIGINT,
// SIGTERM) and returns the exit status, as Run.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, stdout, stderr)
}

// Run runs `cluster ctl ARGS` until it is done or ctx ends (which ends a
// watch, get -w, with status 0) and returns the exit status: 0, 1 for a
// refused or failed command (with kubectl's "error: ..." on stderr), 2 for
// bad usage.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("ctl", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprintln(stderr, usage) }
	apiURL := fl.String("api", cmp.Or(os.Getenv("CLUSTER_API"), "http://127.0.0.1:6443"), "the control plane's URL (default $CLUSTER_API)")
	token := fl.String("token", os.Getenv("CLUSTER_TOKEN"), "bearer token (default $CLUSTER_TOKEN)")
	ns := ""
	fl.StringVar(&ns, "n", "", "namespace (default: default)")
	fl.StringVar(&ns, "namespace", "", "namespace (default: default)")
	args, nsArg := namespaceFlag(args)
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	st, err := apiserver.NewStores(*apiURL, *token, httpstore.ClientOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	c := &cli{st: st, namespace: cmp.Or(nsArg, ns, api.DefaultNamespace), stdout: stdout, stderr: stderr}
	verb, rest := fl.Arg(0), fl.Args()[1:]
	verbs := map[string]func(context.Context, []string) error{
		"apply": c.apply, "get": c.get, "describe": c.describe, "delete": c.delete, "scale": c.scale,
		"cordon": c.cordon(true), "uncordon": c.cordon(false), "drain": c.drain, "logs": c.logs, "rollout": c.rollout,
	}
	run, ok := verbs[verb]
	if !ok {
		fmt.Fprintf(stderr, "error: unknown command %q for \"cluster ctl\"\n%s\n", verb, usage)
		return 2
	}
	if err := run(ctx, rest); err != nil {
		fmt.Fprintln(stderr, errorText(err))
		return 1
	}
	return 0
}

// namespaceFlag takes -n/--namespace out of args wherever it is, as
// kubectl takes it before or after the verb, and returns the other
// arguments and the namespace ("" if none).
func namespaceFlag(args []string) ([]string, string) {
	var out []string
	ns := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-n" || a == "--namespace" || a == "-namespace") && i+1 < len(args):
			ns = args[i+1]
			i++
		case strings.HasPrefix(a, "-n=") || strings.HasPrefix(a, "--namespace="):
			_, ns, _ = strings.Cut(a, "=")
		default:
			out = append(out, a)
		}
	}
	return out, ns
}

// errorText words an error as kubectl does: "Error from server (Invalid):
// ..." for what the server refused, "error: ..." for the rest.
func errorText(err error) string {
	var he *httpstore.Error
	if errors.As(err, &he) && he.Code != "" {
		reason := map[string]string{"Invalid": "Invalid", "Conflict": "Conflict", "NotFound": "NotFound",
			"Unauthorized": "Unauthorized", "Forbidden": "Forbidden", "TooLarge": "RequestEntityTooLarge"}[he.Code]
		return fmt.Sprintf("Error from server (%s): %s", cmp.Or(reason, he.Code), he.Message)
	}
	var nf notFoundError
	if errors.As(err, &nf) {
		return fmt.Sprintf("Error from server (NotFound): %s %q not found", nf.kind.resource(), nf.name)
	}
	return "error: " + err.Error()
}

// notFoundError is an object that is not there.
type notFoundError struct {
	kind *kind
	name string
}

func (e notFoundError) Error() string {
	return fmt.Sprintf("%s %q not found", e.kind.resource(), e.name)
}

// kind is one kind as the CLI names it.
type kind struct {
	name       string // Deployment
	plural     string // deployments
	aliases    []string
	group      string // apps
	namespaced bool
}

var kinds = []*kind{
	{api.KindDeployment, "deployments", []string{"deployment", "deploy"}, "apps", true},
	{api.KindReplicaSet, "replicasets", []string{"replicaset", "rs"}, "apps", true},
	{api.KindPod, "pods", []string{"pod", "po"}, "", true},
	{api.KindNode, "nodes", []string{"node", "no"}, "", false},
	{api.KindLease, "leases", []string{"lease"}, "coordination.k8s.io", true},
}

// resource is "deployments.apps", as kubectl's errors say it.
func (k *kind) resource() string {
	if k.group == "" {
		return k.plural
	}
	return k.plural + "." + strings.Split(k.group, ".")[0]
}

// ref is "deployment.apps/web", as kubectl names an object it acted on.
func (k *kind) ref(name string) string {
	s := strings.ToLower(k.name)
	if k.group != "" {
		s += "." + strings.Split(k.group, ".")[0]
	}
	return s + "/" + name
}

func lookupKind(s string) (*kind, error) {
	s = strings.ToLower(s)
	for _, k := range kinds {
		if s == k.plural || slices.Contains(k.aliases, s) || s == strings.ToLower(k.name) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("the server doesn't have a resource type %q", s)
}

// kindAndName reads "KIND/NAME", or "KIND NAME" from two arguments, and
// returns the arguments left.
func kindAndName(args []string) (*kind, string, []string, error) {
	if len(args) == 0 {
		return nil, "", nil, errors.New("you must specify the type of resource and its name, as KIND/NAME")
	}
	if k, name, ok := strings.Cut(args[0], "/"); ok {
		kd, err := lookupKind(k)
		if err == nil && name == "" {
			err = errors.New("resource name may not be empty")
		}
		return kd, name, args[1:], err
	}
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		return nil, "", nil, fmt.Errorf("you must specify the name of the %s, as KIND/NAME", args[0])
	}
	kd, err := lookupKind(args[0])
	return kd, args[1], args[2:], err
}

// key is the store key of name of kind k in the CLI's namespace.
func (c *cli) key(k *kind, name string) string {
	if !k.namespaced {
		return name
	}
	return api.Key(c.namespace, name)
}

// item is a pointer to a value of one of the kinds, and its revision.
type item struct {
	v   any
	rev informer.Revision
}

func (o item) meta() *api.Metadata { return api.MetaOf(o.v) }

// list returns every object of kind k (of every namespace), sorted by key.
func (c *cli) list(ctx context.Context, k *kind) ([]item, informer.Revision, error) {
	switch k.name {
	case api.KindDeployment:
		return listOf(ctx, c.st.Deployments)
	case api.KindReplicaSet:
		return listOf(ctx, c.st.ReplicaSets)
	case api.KindPod:
		return listOf(ctx, c.st.Pods)
	case api.KindNode:
		return listOf(ctx, c.st.Nodes)
	}
	return listOf(ctx, c.st.Leases)
}

func listOf[V any](ctx context.Context, st informer.Store[string, V]) ([]item, informer.Revision, error) {
	entries, rev, err := st.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(entries, func(a, b informer.Entry[string, V]) int { return strings.Compare(a.Key, b.Key) })
	out := make([]item, 0, len(entries))
	for _, e := range entries {
		if e.Err == nil {
			out = append(out, item{v: &e.Value, rev: e.Revision})
		}
	}
	return out, rev, nil
}

// get returns the object name of kind k, or a notFoundError.
func (c *cli) getObject(ctx context.Context, k *kind, name string) (item, error) {
	key := c.key(k, name)
	var o item
	var ok bool
	var err error
	switch k.name {
	case api.KindDeployment:
		o, ok, err = getOf(ctx, c.st.Deployments, key)
	case api.KindReplicaSet:
		o, ok, err = getOf(ctx, c.st.ReplicaSets, key)
	case api.KindPod:
		o, ok, err = getOf(ctx, c.st.Pods, key)
	case api.KindNode:
		o, ok, err = getOf(ctx, c.st.Nodes, key)
	default:
		o, ok, err = getOf(ctx, c.st.Leases, key)
	}
	if err == nil && !ok {
		err = notFoundError{k, name}
	}
	return o, err
}

func getOf[V any](ctx context.Context, st informer.Store[string, V], key string) (item, bool, error) {
	v, rev, ok, err := st.Get(ctx, key)
	return item{v: &v, rev: rev}, ok, err
}
