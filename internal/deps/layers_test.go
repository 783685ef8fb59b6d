package deps_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The queue's place in the data path (informer → queue → reconcile): the
// queue's engine, internal/workqueue, and its public face, queue, compile
// nothing of this module but these, so that neither can come to know about
// informers or controllers.
var onlyModuleImports = map[string][]string{
	"backoff":            {},
	"internal/workqueue": {"backoff"},
	"queue":              {"backoff", "internal/workqueue"},
}

// And nothing left of the queue compiles it: the packages under these
// prefixes (whole path elements) compile neither queue nor its engine.
// Only reconcile uses the engine directly; its debug pages and a program
// use the queue through queue.
var leftOfTheQueue = []string{"backoff", "events", "informer", "leader", "object"}

func TestTheQueueShouldCompileOnlyBackoffOfThisModuleAndNothingLeftOfItShouldCompileTheQueue(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "this test runs `go list -deps`: it needs the go command on PATH")
	out, err := exec.Command(goCmd, "list", module+"/...").Output()
	require.NoError(t, err, "go list %s/...", module)
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, module+"/")
		if onlyModuleImports[rel] != nil || slices.ContainsFunc(leftOfTheQueue, func(l string) bool { return under(rel, l) }) {
			pkgs = append(pkgs, p)
		}
	}
	for p := range onlyModuleImports {
		require.Contains(t, pkgs, module+"/"+p, "%s is not a package of this module any more: update this test", p)
	}
	imports := importGraph(t, goCmd, pkgs)

	for _, root := range pkgs {
		rel := strings.TrimPrefix(root, module+"/")
		allowed, fenced := onlyModuleImports[rel]
		for _, path := range moduleChains(imports, root) {
			dep := strings.TrimPrefix(path[len(path)-1], module+"/")
			switch {
			case fenced && !slices.Contains(allowed, dep):
				t.Errorf("%s compiles %s; of this module it may compile only %v\n\t%s", rel, dep, allowed,
					strings.Join(path, "\n\t  imports "))
			case !fenced && (under(dep, "queue") || under(dep, "internal/workqueue")):
				t.Errorf("%s compiles %s, which is right of it in the data path\n\t%s", rel, dep,
					strings.Join(path, "\n\t  imports "))
			}
		}
	}
}

// moduleChains walks the imports of root breadth first and returns, for
// every other package of this module it reaches, the shortest import chain
// to it, root first.
func moduleChains(imports map[string][]string, root string) [][]string {
	parent := map[string]string{root: ""}
	var chains [][]string
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if p != root && under(p, module) {
			chains = append(chains, pathTo(parent, p))
		}
		for _, q := range imports[p] {
			if _, ok := parent[q]; !ok {
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	return chains
}
