package reconcile_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The debug pages' data is for people, not an API: reconcile exports none
// of it, and leaves templates and HTML to the package that serves them.
func TestReconcileShouldLeaveThePagesDataAndTemplatesToThePackageThatServesThem(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	for _, imp := range []string{"html/template", "embed"} {
		assert.NotContains(t, pkg.Imports, imp)
	}
	exported := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err, name)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						exported[s.Name.Name] = s.Name.IsExported()
					case *ast.ValueSpec:
						for _, n := range s.Names {
							exported[n.Name] = n.IsExported()
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.IsExported() {
					exported["method "+d.Name.Name] = true
				}
			}
		}
	}
	for _, name := range []string{"Overview", "ControllerPage", "KeyPage", "InformerInfo", "ControllerInfo", "KeyInfo",
		"KeyLine", "ReconcileLine", "InFlight", "BadKeyLine", "EventLister",
		"ReadyShown", "FailingShown", "BadKeysShown", "MaxErrorBytes", "method Inspect", "method InspectKey"} {
		assert.False(t, exported[name], "reconcile exports %s", name)
	}
	for _, name := range []string{"DebugOptions", "method DebugHandler", "method Unpark", "method UnparkAll"} {
		assert.True(t, exported[name], "reconcile no longer exports %s", name)
	}
}
