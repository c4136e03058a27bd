package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/servetune/servetune/internal/testengine"
)

const module = "github.com/servetune/servetune"

// tree is the module as the rules read it: every Go file outside
// testdata/ (tests included), parsed with its comments, the documents
// under docs/, and go list's graph of the module's packages and all they
// link (tests excluded).
type tree struct {
	fset  *token.FileSet
	files []*file           // sorted by path
	docs  map[string][]byte // docs/NAME.md by its path from the root
	pkgs  map[string]*pkg   // by import path
	ours  []string          // the module's import paths, sorted
}

// file is one Go file of the tree.
type file struct {
	path string // from the module root, slash-separated: the name a message gives
	src  []byte
	ast  *ast.File
	test bool // a _test.go file
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Module     *struct{ Path string }
}

var (
	loadOnce sync.Once
	loaded   *tree
	loadErr  error
)

// moduleTree reads the module once per test binary.
func moduleTree(t *testing.T) *tree {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = load(testengine.Root()) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

// skipDir says which directories hold no Go file of the module: the go
// tool's own exceptions (testdata, names starting with . or _) and bin/,
// where the build writes.
func skipDir(rel, name string) bool {
	return name == "testdata" || rel == "bin" || (rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")))
}

// load reads the module at root: its Go files and documents, then go
// list's graph.
func load(root string) (*tree, error) {
	tr := &tree{fset: token.NewFileSet(), docs: map[string][]byte{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f, err := tr.parse(rel, src)
			if err != nil {
				return err
			}
			tr.files = append(tr.files, f)
		case path.Dir(rel) == "docs" && strings.HasSuffix(rel, ".md"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tr.docs[rel] = b
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Dir,GoFiles,CgoFiles,Imports,Module", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	tr.pkgs = map[string]*pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		p := &pkg{}
		if err := dec.Decode(p); err != nil {
			return nil, err
		}
		tr.pkgs[p.ImportPath] = p
		if p.Module != nil && p.Module.Path == module {
			tr.ours = append(tr.ours, p.ImportPath)
		}
	}
	slices.Sort(tr.ours)
	return tr, nil
}

// parse parses src as the Go file rel, positions named by rel.
func (tr *tree) parse(rel string, src []byte) (*file, error) {
	af, err := parser.ParseFile(tr.fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	return &file{path: rel, src: src, ast: af, test: strings.HasSuffix(rel, "_test.go")}, nil
}

// with is the tree with one file added or replaced: a Go file (its
// package's imports in the graph follow it) or a document under docs/.
// Each rule's deliberate violation is read this way.
func (tr *tree) with(rel, src string) (*tree, error) {
	cp := *tr
	if strings.HasSuffix(rel, ".md") {
		cp.docs = maps.Clone(tr.docs)
		cp.docs[rel] = []byte(src)
		return &cp, nil
	}
	f, err := tr.parse(rel, []byte(src))
	if err != nil {
		return nil, err
	}
	cp.files = slices.DeleteFunc(slices.Clone(tr.files), func(g *file) bool { return g.path == rel })
	cp.files = append(cp.files, f)
	slices.SortFunc(cp.files, func(a, b *file) int { return strings.Compare(a.path, b.path) })
	if f.test {
		return &cp, nil
	}
	ip := module + "/" + path.Dir(rel)
	p, ok := tr.pkgs[ip]
	if !ok {
		return nil, fmt.Errorf("%s: no package %s in the module", rel, ip)
	}
	q := *p
	q.GoFiles = append(slices.Clone(p.GoFiles), path.Base(rel))
	q.Imports = slices.Clone(p.Imports)
	for _, im := range f.ast.Imports {
		v, _ := strconv.Unquote(im.Path.Value)
		if !slices.Contains(q.Imports, v) {
			q.Imports = append(q.Imports, v)
		}
	}
	cp.pkgs = maps.Clone(tr.pkgs)
	cp.pkgs[ip] = &q
	return &cp, nil
}

// sources are the non-test Go files.
func (tr *tree) sources() []*file {
	var out []*file
	for _, f := range tr.files {
		if !f.test {
			out = append(out, f)
		}
	}
	return out
}

// sourcesOutside is the non-test files of every package but the one in
// dir: a rule's exemption for the package that is its one home.
func (tr *tree) sourcesOutside(dir string) []*file {
	var out []*file
	for _, f := range tr.sources() {
		if path.Dir(f.path) != dir {
			out = append(out, f)
		}
	}
	return out
}

// at is a position as a message names it: path:line.
func (tr *tree) at(pos token.Pos) string {
	p := tr.fset.Position(pos)
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// lineOf is the line of byte offset i in src, from 1.
func lineOf(src []byte, i int) int { return bytes.Count(src[:i], []byte("\n")) + 1 }

// full is a rule's package name as an import path. Names are relative to
// the module; "..." is every package of it; a name with a dot in its
// first element is outside the module (github.com/docker/docker/...).
func full(name string) string {
	if name == "..." {
		return module + "/..."
	}
	if first, _, _ := strings.Cut(name, "/"); strings.Contains(first, ".") {
		return name
	}
	return module + "/" + name
}

// matches says whether import path p is name or, for "x/...", under x.
func matches(p, name string) bool {
	name = full(name)
	if base, ok := strings.CutSuffix(name, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == name
}

func matchesAny(p string, names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return matches(p, n) })
}

// rel is an import path of the module relative to it.
func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// short is an import path as a message gives it: relative to the module
// when it is the module's, else whole.
func short(p string) string {
	if q, ok := strings.CutPrefix(p, module+"/"); ok {
		return q
	}
	return p
}

// inPackage says whether f is a non-test file of the module's package
// named name (relative to the module, as in rules: "tuner", "launcher/...").
func inPackage(f *file, names ...string) bool {
	return !f.test && matchesAny(module+"/"+path.Dir(f.path), names)
}

// importSite is the file and line of p's import of dep, p's directory
// when no file spells it (an import through cgo's preamble).
func (tr *tree) importSite(p, dep string) string {
	dir := rel(p)
	if dir == "" {
		dir = "."
	}
	for _, f := range tr.files {
		if f.test || path.Dir(f.path) != dir {
			continue
		}
		for _, im := range f.ast.Imports {
			if v, _ := strconv.Unquote(im.Path.Value); v == dep {
				return tr.at(im.Pos())
			}
		}
	}
	return dir
}

// chain is the shortest path of imports from p to a package matching one
// of names, nil when p links none.
func (tr *tree) chain(p string, names []string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != p && matchesAny(cur, names) {
			var out []string
			for at := cur; at != ""; at = prev[at] {
				out = append([]string{at}, out...)
			}
			return out
		}
		q := tr.pkgs[cur]
		if q == nil {
			continue
		}
		for _, im := range q.Imports {
			if _, seen := prev[im]; !seen {
				prev[im] = cur
				queue = append(queue, im)
			}
		}
	}
	return nil
}

// localName is the name f refers to the package at import path ip by,
// "" when f does not import it (or imports it for its effects alone).
func (tr *tree) localName(f *file, ip string) string {
	for _, im := range f.ast.Imports {
		if v, _ := strconv.Unquote(im.Path.Value); v != ip {
			continue
		}
		if im.Name != nil {
			if im.Name.Name == "_" || im.Name.Name == "." {
				return ""
			}
			return im.Name.Name
		}
		if p := tr.pkgs[ip]; p != nil && p.Name != "" {
			return p.Name
		}
		return path.Base(ip)
	}
	return ""
}

// uses calls found with each selector of f that names a declaration of
// the package at import path ip (yaml.Marshal), when the name is one of
// names (any name when names is empty).
func (tr *tree) uses(f *file, ip string, names []string, found func(*ast.SelectorExpr)) {
	local := tr.localName(f, ip)
	if local == "" {
		return
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && (len(names) == 0 || slices.Contains(names, sel.Sel.Name)) {
			found(sel)
		}
		return true
	})
}
