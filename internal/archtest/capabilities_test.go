package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

// TestCapabilitiesOneValue: what a launcher can do beside Launch is read
// from its launcher.Capabilities value, never asked by a type assertion (or a type
// switch) on an interface with a capability's method, inline or named, in
// any file of the module, tests included. The capabilities' names are
// launcher.Capabilities' fields, so a new one is covered without a change here.
func TestCapabilitiesOneValue(t *testing.T) {
	caps := map[string]bool{}
	for f := range reflect.TypeFor[launcher.Capabilities]().Fields() {
		caps[f.Name] = true
	}
	root := testengine.Root()
	type file struct {
		rel  string
		fset *token.FileSet
		ast  *ast.File
	}
	var files []file
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, file{rel, fset, af})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// capMethod is the capability an interface type's methods name, "" when none.
	capMethod := func(it *ast.InterfaceType) string {
		for _, m := range it.Methods.List {
			for _, n := range m.Names {
				if caps[n.Name] {
					return n.Name
				}
			}
		}
		return ""
	}
	named := map[string]string{} // interface type name -> the capability it asks for
	for _, f := range files {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					if m := capMethod(it); m != "" {
						named[ts.Name.Name] = m
					}
				}
			}
			return true
		})
	}
	asks := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.InterfaceType:
			return capMethod(e)
		case *ast.Ident:
			return named[e.Name]
		case *ast.SelectorExpr:
			return named[e.Sel.Name]
		}
		return ""
	}
	for _, f := range files {
		report := func(e ast.Expr) {
			if m := asks(e); m != "" {
				t.Errorf("%s:%d asserts a launcher capability (%s) by type; read Launcher.Capabilities().%s",
					f.rel, f.fset.Position(e.Pos()).Line, m, m)
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil {
					report(n.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						report(e)
					}
				}
			}
			return true
		})
	}
}
