package archtest

import (
	"fmt"
	"go/ast"
	"path"
	"reflect"
	"strings"

	"github.com/servetune/servetune/launcher"
)

// capabilitiesOneValue checks that what a launcher can do beside Launch is
// read from its launcher.Capabilities value, never asked by a type
// assertion (or a type switch) on an interface with a capability's
// method, inline or named, in any file of the module, tests included.
// The capabilities' names are launcher.Capabilities' fields, so a new one
// is covered without a change here.
func capabilitiesOneValue(tr *tree) []string {
	caps := map[string]bool{}
	for f := range reflect.TypeFor[launcher.Capabilities]().Fields() {
		caps[f.Name] = true
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
	for _, f := range tr.files {
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
	var out []string
	for _, f := range tr.files {
		report := func(e ast.Expr) {
			if m := asks(e); m != "" {
				out = append(out, fmt.Sprintf("%s asserts a launcher capability (%s) by type; read Launcher.Capabilities().%s", tr.at(e.Pos()), m, m))
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
	return out
}

// noTestdataShipped checks that no package a binary links embeds a
// testdata/ file (go:embed): test data stays out of what ships.
// internal/testspec, which only tests import (the row test-packages),
// is the exception.
func noTestdataShipped(tr *tree) []string {
	var out []string
	for _, f := range tr.sources() {
		if path.Dir(f.path) == "internal/testspec" {
			continue
		}
		for _, cg := range f.ast.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:embed") && strings.Contains(c.Text, "testdata") {
					out = append(out, fmt.Sprintf("%s: %s: a shipped package embeds test data; keep what the binary reads beside the package, outside testdata/", tr.at(c.Pos()), c.Text))
				}
			}
		}
	}
	return out
}
