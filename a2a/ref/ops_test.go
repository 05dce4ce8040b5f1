package ref_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/plan"
)

// Every operation of the planner's table has its reference here, by the
// row's name: Name for every rank's output, Name+"For" for one rank's.
func TestEveryOperationHasAReference(t *testing.T) {
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
	}
	require.True(t, funcs["SendRecvHeadsFor"], "the package's functions were read")
	for _, o := range plan.Operations {
		assert.True(t, funcs[o.Name], "no reference %s for %s", o.Name, o.Op)
		assert.True(t, funcs[o.Name+"For"], "no reference %sFor for %s", o.Name, o.Op)
	}
}
