package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeQuickStart returns the first ```go block of the README's "Quick
// start" section.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Quick start\n")
	require.True(t, ok, "README.md has no Quick start section")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok, "the Quick start section has no go code block")
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok, "the Quick start's code block is not closed")
	return block
}

// The README's quick start is run, this program's function, with its doc
// comment, byte for byte: it compiles (this package does) and it checks
// every error (TestEveryErrorChecked).
func TestReadmeShowsRun(t *testing.T) {
	block := readmeQuickStart(t)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", src, parser.ParseComments)
	require.NoError(t, err)
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "run" {
			fn = d
		}
	}
	require.NotNil(t, fn, "main.go has no func run")
	require.NotNil(t, fn.Doc, "run has no doc comment")
	want := string(src[fset.Position(fn.Doc.Pos()).Offset:fset.Position(fn.End()).Offset]) + "\n"
	require.Equal(t, want, block, "README.md's quick start differs from run in examples/join/main.go: copy the function into it")
}

// No call in this program drops an error: none returning one is a
// statement of its own, deferred, started as a goroutine or assigned to
// _, but fmt's printing to the terminal (as errcheck excludes it). The
// package is type-checked against its dependencies' export data, which
// `go list -export` finds in the build cache.
func TestEveryErrorChecked(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to find the dependencies' export data")
	}
	out, err := exec.Command(goTool, "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".").Output()
	require.NoError(t, err, "go list -export")
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, 0)
	require.NoError(t, err)
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	_, err = (&types.Config{Importer: imp}).Check("main", fset, []*ast.File{f}, info)
	require.NoError(t, err, "type-checking main.go")

	errType := types.Universe.Lookup("error").Type()
	// errAt reports whether the call's result k (-1: any) is an error.
	errAt := func(call ast.Expr, k int) bool {
		tv, ok := info.Types[call]
		if !ok {
			return false
		}
		if tup, ok := tv.Type.(*types.Tuple); ok {
			for i := range tup.Len() {
				if (k < 0 || k == i) && types.Identical(tup.At(i).Type(), errType) {
					return true
				}
			}
			return false
		}
		return (k <= 0) && types.Identical(tv.Type, errType)
	}
	printsToTerminal := func(call *ast.CallExpr) bool {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		obj := info.Uses[sel.Sel]
		return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "fmt" && strings.Contains(strings.ToLower(obj.Name()), "print")
	}
	dropped := 0
	check := func(call *ast.CallExpr, how string) {
		if call != nil && errAt(call, -1) && !printsToTerminal(call) {
			dropped++
			t.Errorf("%s: the error of %s is dropped (%s)", fset.Position(call.Pos()), types.ExprString(call.Fun), how)
		}
	}
	calls := 0
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			calls++
		case *ast.ExprStmt:
			call, _ := n.X.(*ast.CallExpr)
			check(call, "a statement of its own")
		case *ast.DeferStmt:
			check(n.Call, "deferred")
		case *ast.GoStmt:
			check(n.Call, "in a goroutine")
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if id, ok := lhs.(*ast.Ident); !ok || id.Name != "_" {
					continue
				}
				if len(n.Rhs) == 1 && errAt(n.Rhs[0], i) {
					dropped++
					t.Errorf("%s: an error assigned to _", fset.Position(lhs.Pos()))
				} else if len(n.Rhs) == len(n.Lhs) && errAt(n.Rhs[i], -1) {
					dropped++
					t.Errorf("%s: an error assigned to _", fset.Position(lhs.Pos()))
				}
			}
		}
		return true
	})
	require.Greater(t, calls, 20, "the check saw the program's calls")
	require.Zero(t, dropped)
}
