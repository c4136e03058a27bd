package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"path"
	"reflect"
	"slices"
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
	for _, f := range tr.sourcesOutside("internal/testspec") {
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

// testsOnly checks that internal/archtest holds tests only: its non-test
// files declare nothing beside the package.
func testsOnly(tr *tree) []string {
	var out []string
	for _, f := range tr.sources() {
		if path.Dir(f.path) != "internal/archtest" {
			continue
		}
		for _, d := range f.ast.Decls {
			out = append(out, fmt.Sprintf("%s: %s: internal/archtest holds tests only; put the declaration in a _test.go file", tr.at(d.Pos()), declName(d)))
		}
	}
	return out
}

// declName names a declaration for a message: func F, var x, type T.
func declName(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return "func " + d.Name.Name
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				return d.Tok.String() + " " + s.Names[0].Name
			case *ast.TypeSpec:
				return "type " + s.Name.Name
			case *ast.ImportSpec:
				return "import " + s.Path.Value
			}
		}
		return d.Tok.String()
	}
	return "a declaration"
}

// calls is a check that the non-test files of the packages in (all of
// the module when in is empty) but those of except name none of names
// from the package at import path ip: the claim that what they do is
// another file's.
type calls struct {
	in, except []string // packages, as in layer
	skip       string   // a file of in that may (its path)
	ip         string
	names      []string
	why        string // what to use instead
}

func (c calls) check(tr *tree) []string {
	var out []string
	for _, f := range tr.sources() {
		if f.path == c.skip || (len(c.in) > 0 && !inPackage(f, c.in...)) || inPackage(f, c.except...) {
			continue
		}
		tr.uses(f, c.ip, c.names, func(sel *ast.SelectorExpr) {
			out = append(out, fmt.Sprintf("%s: %s.%s: %s", tr.at(sel.Pos()), sel.X.(*ast.Ident).Name, sel.Sel.Name, c.why))
		})
	}
	return out
}

// seededSamplers checks that the samplers draw from their own seeded
// *rand.Rand, never math/rand's global source: their non-test files use
// nothing of math/rand or math/rand/v2 but its constructors (New...) and
// types.
func seededSamplers(tr *tree) []string {
	ok := func(name string) bool {
		return strings.HasPrefix(name, "New") || slices.Contains([]string{"Rand", "Source", "Source64", "PCG", "ChaCha8", "Zipf"}, name)
	}
	var out []string
	for _, f := range tr.sources() {
		if !inPackage(f, "tuner/sampler", "tuner/guided") {
			continue
		}
		for _, ip := range []string{"math/rand", "math/rand/v2"} {
			tr.uses(f, ip, nil, func(sel *ast.SelectorExpr) {
				if !ok(sel.Sel.Name) {
					out = append(out, fmt.Sprintf("%s: %s.%s: math/rand's global source; draw from the sampler's own seeded *rand.Rand", tr.at(sel.Pos()), sel.X.(*ast.Ident).Name, sel.Sel.Name))
				}
			})
		}
	}
	return out
}

// registryOnce checks that a table of named kinds is an
// internal/registry.Registry: every top-level function named Register
// adds to a package-level variable made by registry.New.
func registryOnce(tr *tree) []string {
	const ip = module + "/internal/registry"
	// made is, per package directory, its variables made by registry.New.
	made := map[string]map[string]bool{}
	for _, f := range tr.sources() {
		local := tr.localName(f, ip)
		if local == "" {
			continue
		}
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if isCallOf(v, local, "New") && i < len(vs.Names) {
						dir := path.Dir(f.path)
						if made[dir] == nil {
							made[dir] = map[string]bool{}
						}
						made[dir][vs.Names[i].Name] = true
					}
				}
			}
		}
	}
	var out []string
	for _, f := range tr.sourcesOutside("internal/registry") {
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != "Register" || fd.Body == nil {
				continue
			}
			adds := false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Add" {
						if id, ok := sel.X.(*ast.Ident); ok && made[path.Dir(f.path)][id.Name] {
							adds = true
						}
					}
				}
				return !adds
			})
			if !adds {
				out = append(out, fmt.Sprintf("%s: func Register keeps its own table; add to an internal/registry.Registry (registry.New)", tr.at(fd.Pos())))
			}
		}
	}
	return out
}

// isCallOf says whether e calls pkg.name, generic or not (registry.New[Kind](...)).
func isCallOf(e ast.Expr, pkg, name string) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	fun := c.Fun
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// kindsImportsEveryKind checks that launcher/kinds imports every package
// that registers a launcher kind (launcher.Register), and only those: one
// import line per kind.
func kindsImportsEveryKind(tr *tree) []string {
	const kinds = module + "/launcher/kinds"
	registers := map[string]string{} // import path -> where it registers
	for _, f := range tr.sources() {
		tr.uses(f, module+"/launcher", []string{"Register"}, func(sel *ast.SelectorExpr) {
			if ip := module + "/" + path.Dir(f.path); registers[ip] == "" {
				registers[ip] = tr.at(sel.Pos())
			}
		})
	}
	imports := tr.pkgs[kinds].Imports
	var out []string
	for _, ip := range slices.Sorted(maps.Keys(registers)) {
		if !slices.Contains(imports, ip) {
			out = append(out, fmt.Sprintf("%s registers a launcher kind (launcher.Register), and launcher/kinds does not import %s", registers[ip], short(ip)))
		}
	}
	for _, ip := range imports {
		if registers[ip] == "" {
			out = append(out, fmt.Sprintf("%s imports %s, which registers no launcher kind", tr.importSite(kinds, ip), short(ip)))
		}
	}
	return out
}

// failureClassesOnce checks that the trial failure classes are
// internal/serving/engine's (failure.go: Failures, Classify): no other
// non-test file declares an engine.Failure or converts a literal to one.
func failureClassesOnce(tr *tree) []string {
	const ip = module + "/internal/serving/engine"
	var out []string
	for _, f := range tr.sourcesOutside("internal/serving/engine") {
		local := tr.localName(f, ip)
		if local == "" {
			continue
		}
		isFailure := func(e ast.Expr) bool {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			id, ok := sel.X.(*ast.Ident)
			return ok && id.Name == local && sel.Sel.Name == "Failure"
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if len(n.Args) == 1 && isFailure(n.Fun) {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok {
						out = append(out, fmt.Sprintf("%s: %s.Failure(%s): a failure class outside internal/serving/engine/failure.go", tr.at(n.Pos()), local, lit.Value))
					}
				}
			case *ast.ValueSpec:
				if n.Type != nil && isFailure(n.Type) && len(n.Values) > 0 {
					out = append(out, fmt.Sprintf("%s: %s %s.Failure: a failure class outside internal/serving/engine/failure.go", tr.at(n.Pos()), n.Names[0].Name, local))
				}
			}
			return true
		})
	}
	return out
}

// storeWriters are the methods of store.Store and store.Lease that write.
var storeWriters = []string{"Begin", "CreateStudy", "ResumeStudy", "FinishStudy", "StartTrial", "StartConfirmation",
	"FinishTrial", "InterruptRunning", "DeleteStudy", "End", "SetQualityBaseline", "SetStop", "SetForecast"}

// readersWriteNothing checks that the report and the dashboard only read
// the store: they call none of its writers and hold no store.Lease (a
// study's write handle). The writers are checked to be methods store
// declares, so a rename is noticed.
func readersWriteNothing(tr *tree) []string {
	var out []string
	declared := map[string]bool{}
	for _, f := range tr.sources() {
		if path.Dir(f.path) != "store" {
			continue
		}
		for _, d := range f.ast.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				declared[fd.Name.Name] = true
			}
		}
	}
	for _, w := range storeWriters {
		if !declared[w] {
			out = append(out, fmt.Sprintf("store/: declares no method %s any more; bring internal/archtest's storeWriters up to date", w))
		}
	}
	for _, f := range tr.sources() {
		if !inPackage(f, "internal/present/report", "internal/present/ui") {
			continue
		}
		tr.uses(f, module+"/store", []string{"Lease", "BeginOptions"}, func(sel *ast.SelectorExpr) {
			out = append(out, fmt.Sprintf("%s: store.%s: a reader holds a study's write handle", tr.at(sel.Pos()), sel.Sel.Name))
		})
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains(storeWriters, sel.Sel.Name) {
					out = append(out, fmt.Sprintf("%s: .%s(: a reader calls a store writer", tr.at(sel.Sel.Pos()), sel.Sel.Name))
				}
			}
			return true
		})
	}
	return out
}

// specSameWhateverLinks checks that a spec parses the same whatever the
// program links: tuner/spec has no init function, and no package's init
// calls into tuner/spec or sets one of its variables (a closure an init
// hands on runs later, and is allowed).
func specSameWhateverLinks(tr *tree) []string {
	const ip = module + "/tuner/spec"
	var out []string
	for _, f := range tr.sources() {
		local := tr.localName(f, ip)
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != "init" || fd.Body == nil {
				continue
			}
			if path.Dir(f.path) == "tuner/spec" {
				out = append(out, fmt.Sprintf("%s: func init: tuner/spec runs nothing as a program starts", tr.at(fd.Pos())))
				continue
			}
			if local == "" {
				continue
			}
			// ofSpec is the variable or function of tuner/spec that e
			// names, or a part of (spec.DefaultConfirm.Top).
			ofSpec := func(e ast.Expr) (string, bool) {
				for {
					switch x := e.(type) {
					case *ast.SelectorExpr:
						if id, ok := x.X.(*ast.Ident); ok && id.Name == local {
							return local + "." + x.Sel.Name, true
						}
						e = x.X
					case *ast.IndexExpr:
						e = x.X
					case *ast.StarExpr:
						e = x.X
					case *ast.ParenExpr:
						e = x.X
					default:
						return "", false
					}
				}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false
				case *ast.CallExpr:
					if name, ok := ofSpec(n.Fun); ok {
						out = append(out, fmt.Sprintf("%s: init calls %s: what a spec accepts would depend on what the program links", tr.at(n.Pos()), name))
					}
				case *ast.AssignStmt:
					for _, l := range n.Lhs {
						if name, ok := ofSpec(l); ok {
							out = append(out, fmt.Sprintf("%s: init sets %s: what a spec accepts would depend on what the program links", tr.at(l.Pos()), name))
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// testSleepsSaid checks that tests synchronise on events, not on sleeps:
// a time.Sleep in a test file runs on a synctest bubble's fake clock
// (inside synctest.Test), or is a delay that is its test's subject, which
// a comment on its line, or the line above it, says.
func testSleepsSaid(tr *tree) []string {
	var out []string
	for _, f := range tr.files {
		if !f.test {
			continue
		}
		commented := map[int]bool{}
		for _, cg := range f.ast.Comments {
			for _, c := range cg.List {
				commented[tr.fset.Position(c.Pos()).Line] = true
			}
		}
		// bubbles are the spans of synctest.Test calls.
		var bubbles [][2]token.Pos
		tr.uses(f, "testing/synctest", []string{"Test"}, func(sel *ast.SelectorExpr) {
			ast.Inspect(f.ast, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && c.Fun == sel {
					bubbles = append(bubbles, [2]token.Pos{c.Pos(), c.End()})
				}
				return true
			})
		})
		tr.uses(f, "time", []string{"Sleep"}, func(sel *ast.SelectorExpr) {
			if slices.ContainsFunc(bubbles, func(b [2]token.Pos) bool { return b[0] <= sel.Pos() && sel.Pos() < b[1] }) {
				return
			}
			line := tr.fset.Position(sel.Pos()).Line
			if !commented[line] && !commented[line-1] {
				out = append(out, fmt.Sprintf("%s: time.Sleep: a test waits on the clock; wait for an event (a channel, a watch, synctest.Wait), or say on its line why the delay is the test's subject", tr.at(sel.Pos())))
			}
		})
	}
	return out
}
