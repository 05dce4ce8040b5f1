package a2a_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// undocumented parses the package in dir (its files, not its tests) and
// lists every exported name that go doc would show without a doc comment
// of its own: functions, methods of exported types, types, the fields of
// exported structs and the methods of exported interfaces, and each
// constant and variable (in a parenthesised group, a comment of its own
// or on its line; the group's comment does not count). It returns how
// many names it checked too.
func undocumented(t *testing.T, dir string) (missing []string, checked int) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	require.NotEmpty(t, files, "%s holds Go files", dir)
	check := func(pos token.Pos, name string, documented bool) {
		checked++
		if !documented {
			p := fset.Position(pos)
			missing = append(missing, filepath.Base(p.Filename)+": "+name)
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); !ok || !id.IsExported() {
						continue // a method of an unexported type: not shown
					}
					name = recv.(*ast.Ident).Name + "." + name
				}
				check(d.Pos(), name, d.Doc != nil)
			case *ast.GenDecl:
				grouped := d.Lparen.IsValid()
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						check(s.Pos(), "type "+s.Name.Name, s.Doc != nil || (!grouped && d.Doc != nil))
						var fields *ast.FieldList
						switch tt := s.Type.(type) {
						case *ast.StructType:
							fields = tt.Fields
						case *ast.InterfaceType:
							fields = tt.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								if n.IsExported() {
									check(n.Pos(), s.Name.Name+"."+n.Name, fl.Doc != nil || fl.Comment != nil)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								check(n.Pos(), d.Tok.String()+" "+n.Name, s.Doc != nil || s.Comment != nil || (!grouped && d.Doc != nil))
							}
						}
					}
				}
			}
		}
	}
	return missing, checked
}

// go doc shows a doc comment for every exported name of the public
// packages: a2a's errors each say when they are returned, where go doc
// showed "= api.ErrConfig" and nothing else for most of them.
func TestEveryExportedNameHasADoc(t *testing.T) {
	for _, dir := range []string{".", "exchange", "ref"} {
		missing, checked := undocumented(t, dir)
		assert.Greater(t, checked, 20, "%s: the check saw the package's names", dir)
		assert.Empty(t, missing, "%s: exported names without a doc comment", dir)
	}
}

// Each of a2a's errors is internal/api's of the same name, not a copy, so
// that errors.Is matches what every layer below returns; and each one's
// doc says when it is returned, starting with its name.
func TestErrorsAreTheLayersOwn(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, parser.ParseComments)
	require.NoError(t, err)
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Err") {
					continue
				}
				n++
				sel, ok := vs.Values[i].(*ast.SelectorExpr)
				if assert.True(t, ok, "%s is not a selector", name.Name) {
					assert.Equal(t, "api."+name.Name, selectorString(sel), "%s", name.Name)
				}
				if assert.NotNil(t, vs.Doc, "%s has no doc", name.Name) {
					assert.True(t, strings.HasPrefix(vs.Doc.Text(), name.Name+": "), "%s's doc starts with its name: %q", name.Name, vs.Doc.Text())
				}
			}
		}
	}
	assert.Equal(t, 26, n, "a2a's errors")
}

// selectorString prints a selector expression a.b.
func selectorString(sel *ast.SelectorExpr) string {
	if id, ok := sel.X.(*ast.Ident); ok {
		return id.Name + "." + sel.Sel.Name
	}
	return "?." + sel.Sel.Name
}

// slug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, other punctuation gone.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docs/GUIDE.md's contents list every one of its sections, in order, each
// linked to its heading's anchor, and nothing else.
func TestGuideContentsListEverySection(t *testing.T) {
	b, err := os.ReadFile("../docs/GUIDE.md")
	require.NoError(t, err)
	guide := string(b)
	var headings, contents []string
	inCode := false
	for _, line := range strings.Split(guide, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inCode = !inCode
		case inCode:
		case strings.HasPrefix(line, "## "):
			h := strings.TrimPrefix(line, "## ")
			headings = append(headings, "["+h+"](#"+slug(h)+")")
		case strings.HasPrefix(line, "- [") && len(headings) == 0:
			contents = append(contents, strings.TrimPrefix(line, "- "))
		}
	}
	require.Greater(t, len(headings), 10, "the guide's sections")
	assert.Equal(t, headings, contents, "docs/GUIDE.md's contents (the list before its first section) and its sections")
	assert.Equal(t, "how-the-buffers-are-shared-configsharing", slug("How the buffers are shared (Config.Sharing)"))
	assert.Equal(t, "gorgoniaorgcu", slug("gorgonia.org/cu"))
}
