package queue_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/internal/workqueue"
	"github.com/converge-go/converge/queue"
)

// The public API is what a program that uses the queue needs: client-go's
// interface, priorities, groups, ageing, metrics and a snapshot. What only
// reconcile and its debug pages use (reasons, inspection, the
// read-your-writes wake-up) lives in internal/workqueue, where it can change
// with them; every name added here is a promise to every program.
func TestThePackageShouldExportOnlyItsPublicAPI(t *testing.T) {
	fset := token.NewFileSet()
	dir, err := os.ReadDir(".")
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range dir {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names = append(names, s.Name.Name)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !ast.IsExported(n) })
	slices.Sort(names)
	assert.Equal(t, []string{
		"AddOptions", "DefaultAgeing", "Metrics", "New", "NewMetrics", "NoAgeing", "Option",
		"PriorityHigh", "PriorityLow", "PriorityNormal", "Queue", "Stats",
		"WithAgeing", "WithClock", "WithGroup", "WithMetrics", "WithRateLimiter",
	}, names)

	var methods []string
	typ := reflect.TypeFor[*queue.Queue[string]]()
	for i := range typ.NumMethod() {
		methods = append(methods, typ.Method(i).Name)
	}
	assert.Equal(t, []string{
		"Add", "AddAfter", "AddRateLimited", "AddWithOptions", "Done", "Forget", "Get",
		"Idle", "Len", "NumRequeues", "ShutDown", "ShutDownWithDrain", "ShuttingDown", "Stats",
	}, methods, "client-go's TypedRateLimitingInterface, AddWithOptions, Idle and Stats")

	var fields []string
	for f := range reflect.TypeFor[queue.AddOptions]().Fields() {
		fields = append(fields, f.Name)
	}
	assert.Equal(t, []string{"After", "RateLimited", "Priority"}, fields)
}

// The public constants restate the engine's: queue cannot name the
// engine's in its godoc without showing an internal package, so they are
// written twice and held equal here.
func TestThePublicConstantsShouldEqualTheEngines(t *testing.T) {
	assert.Equal(t, workqueue.PriorityLow, queue.PriorityLow)
	assert.Equal(t, workqueue.PriorityNormal, queue.PriorityNormal)
	assert.Equal(t, workqueue.PriorityHigh, queue.PriorityHigh)
	assert.Equal(t, workqueue.DefaultAgeing, queue.DefaultAgeing)
	assert.Equal(t, workqueue.NoAgeing, queue.NoAgeing)
}
