package deps_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is the library's module path; the core packages are below it.
const module = "github.com/converge-go/converge"

// core are the packages a program links when it uses the in-memory store:
// the whole data path and leader election, no backend.
var core = []string{
	"backoff",
	"events",
	"queue",
	"internal/workqueue",
	"informer",
	"informer/memstore",
	"informer/httpstore",
	"informer/poll",
	"leader",
	"leader/memlock",
	"object",
	"reconcile",
}

// forbidden are import path prefixes (whole path elements) that no core
// package may compile, directly or through another package, with the
// reason. Tests may import them: a test's imports are not linked into a
// user's program.
var forbidden = []rule{
	{"k8s.io/client-go", "client-go belongs outside the core: in tests, the bench module, or a backend module of its own"},
	{"sigs.k8s.io/controller-runtime", "controller-runtime is a benchmark dependency (the bench module)"},
	{"k8s.io/apimachinery", "apimachinery comes only with client-go"},
	{"k8s.io/klog", "klog comes only with client-go"},
	{"go.etcd.io/etcd", "the etcd client belongs in informer/etcdstore and leader/etcdlock"},
	{"github.com/jackc/pgx", "pgx belongs in informer/pgstore and leader/pglock"},
	{"modernc.org/sqlite", "the SQLite driver belongs in informer/sqlitestore"},
	{"modernc.org/libc", "the SQLite driver's C library comes only with informer/sqlitestore"},
}

// Each core package's dependencies, as the go command resolves them for
// this platform, without tests: what a user's program compiles. On failure
// the message names the import chain from the core package to the first
// forbidden package of each kind, so the import to remove is the chain's
// first step out of this module.
func TestCorePackagesCompileNoKubernetesOrBackendClient(t *testing.T) {
	// go test puts its own GOROOT/bin first on PATH, so this finds the go
	// command that runs the test. Without one the test cannot check
	// anything: fail, never skip.
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "this test runs `go list -deps`: it needs the go command on PATH")

	pkgs := make([]string, len(core))
	for i, p := range core {
		pkgs[i] = module + "/" + p
	}
	imports := importGraph(t, goCmd, pkgs)

	for _, root := range pkgs {
		for _, chain := range forbiddenChains(imports, root) {
			t.Errorf("%s compiles %s: %s\n\t%s", strings.TrimPrefix(root, module+"/"),
				chain.bad.prefix, chain.bad.why, strings.Join(chain.path, "\n\t  imports "))
		}
	}
}

// importGraph runs go list -deps over pkgs and returns every package's
// direct imports.
func importGraph(t *testing.T, goCmd string, pkgs []string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, pkgs...)
	cmd := exec.Command(goCmd, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s\n%s", strings.Join(args, " "), stderr.String())

	imports := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	require.NoError(t, sc.Err())
	for _, p := range pkgs {
		require.Contains(t, imports, p, "go list -deps did not list %s", p)
	}
	return imports
}

// rule forbids the packages under an import path prefix.
type rule struct{ prefix, why string }

// chain is an import path from a core package to a forbidden one.
type chain struct {
	bad rule
	// path starts at the core package and ends at the forbidden package.
	path []string
}

// forbiddenChains walks the imports of root breadth first and returns, per
// forbidden prefix it reaches, the shortest chain to a package under it.
// The walk does not continue past a forbidden package: its own imports
// would only repeat the finding.
func forbiddenChains(imports map[string][]string, root string) []chain {
	parent := map[string]string{root: ""}
	var found []chain
	seen := map[string]bool{} // forbidden prefixes already reported
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if i := slices.IndexFunc(forbidden, func(r rule) bool { return under(p, r.prefix) }); i >= 0 {
			if !seen[forbidden[i].prefix] {
				seen[forbidden[i].prefix] = true
				found = append(found, chain{bad: forbidden[i], path: pathTo(parent, p)})
			}
			continue
		}
		for _, q := range imports[p] {
			if _, ok := parent[q]; !ok {
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	return found
}

// under reports whether import path p is prefix or below it.
func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// pathTo follows parent links from p back to the root and returns the path
// root first.
func pathTo(parent map[string]string, p string) []string {
	var path []string
	for ; p != ""; p = parent[p] {
		path = append(path, p)
	}
	slices.Reverse(path)
	return path
}

// drivers are import path prefixes that only one package of the module may
// import directly: the backend that wraps them. Others reach them through
// it (an example's --store sqlite://), never around it.
var drivers = []struct{ prefix, owner string }{
	{"modernc.org/sqlite", "informer/sqlitestore"},
}

// Every package of the module, tests included, as the go command lists
// them: only a driver's owner imports it.
func TestOnlyItsBackendImportsADatabaseDriver(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "this test runs `go list`: it needs the go command on PATH")
	args := []string{"list", "-test", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module + "/..."}
	cmd := exec.Command(goCmd, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s\n%s", strings.Join(args, " "), stderr.String())
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	checked := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		// A test variant is listed as "pkg [pkg.test]" or "pkg_test [pkg.test]".
		pkg := strings.TrimSuffix(fields[0], "_test")
		checked++
		for _, imp := range fields[1:] {
			for _, d := range drivers {
				if under(imp, d.prefix) && pkg != module+"/"+d.owner {
					t.Errorf("%s imports %s: only %s may (use it through that package)", fields[0], imp, d.owner)
				}
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Positive(t, checked)
}

// allowedK8sModules are the only k8s.io modules the library's go.mod may
// require: the clock and pointer helpers. client-go and apimachinery are
// the kube module's (and the bench module's) requirements, so that a user
// of memstore, etcd or PostgreSQL never downloads Kubernetes.
var allowedK8sModules = []string{"k8s.io/utils"}

// The library's go.mod, read by the go command: every requirement, direct
// or indirect, under k8s.io or sigs.k8s.io must be allowed.
func TestLibraryGoModRequiresNoKubernetesModule(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "this test runs `go mod edit -json`: it needs the go command on PATH")
	gomod, err := exec.Command(goCmd, "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	out, err := exec.Command(goCmd, "mod", "edit", "-json", strings.TrimSpace(string(gomod))).Output()
	require.NoError(t, err, "go mod edit -json")
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path string }
	}
	require.NoError(t, json.Unmarshal(out, &mod))
	require.Equal(t, module, mod.Module.Path, "the go.mod read is the library's")
	for _, r := range mod.Require {
		if (under(r.Path, "k8s.io") || under(r.Path, "sigs.k8s.io")) && !slices.Contains(allowedK8sModules, r.Path) {
			t.Errorf("the library's go.mod requires %s: Kubernetes modules belong in the kube module (kube/go.mod)", r.Path)
		}
	}
}
