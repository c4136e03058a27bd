package archtest

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/testengine"
)

const module = "github.com/servetune/servetune"

// table reads the package column of docs/architecture.md's package table,
// top to bottom.
func table(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9/]+)` \\|")
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			pkgs = append(pkgs, m[1])
		}
	}
	return pkgs
}

// imports runs go list over the module: each package (relative to the
// module) with the module's packages it imports, tests excluded.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		deps[p] = nil
		for _, imp := range f[1:] {
			if q, ok := strings.CutPrefix(imp, module+"/"); ok {
				deps[p] = append(deps[p], q)
			}
		}
	}
	return deps
}

// TestPackageTable: every package is in the table once, every row is a
// package, and a package imports only packages listed below it.
func TestPackageTable(t *testing.T) {
	root := testengine.Root()
	rows := table(t, root)
	deps := imports(t, root)
	at := map[string]int{}
	for i, p := range rows {
		if _, dup := at[p]; dup {
			t.Errorf("docs/architecture.md lists %s twice", p)
		}
		at[p] = i
		if _, ok := deps[p]; !ok {
			t.Errorf("docs/architecture.md lists %s, which is not a package of the module", p)
		}
	}
	for p, ds := range deps {
		i, ok := at[p]
		if !ok {
			t.Errorf("package %s is missing from docs/architecture.md's package table", p)
			continue
		}
		for _, q := range ds {
			if j, ok := at[q]; ok && j <= i {
				t.Errorf("%s imports %s, which docs/architecture.md lists above it", p, q)
			}
		}
	}
}

// crossRef is a pointer at a document's section in a comment:
// `docs/NAME.md (Heading)`, `docs/NAME.md, "Heading"`, or inside
// parentheses `(docs/NAME.md, Heading)`.
var crossRef = regexp.MustCompile(`docs/([a-z-]+)\.md(?: \(([^()]+)\)|, "([^"]+)"|, ([A-Z][^()"]*)\))?`)

// headings returns the heading texts of a Markdown file, backticks removed.
func headings(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	hs := map[string]bool{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(line, "#") {
			h := strings.TrimSpace(strings.TrimLeft(line, "#"))
			hs[strings.ReplaceAll(h, "`", "")] = true
		}
	}
	return hs
}

// TestCommentCrossReferences: every docs/ file a Go comment names exists,
// and every section it names is a heading of that file.
func TestCommentCrossReferences(t *testing.T) {
	root := testengine.Root()
	docs := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, cg := range f.Comments {
			text := strings.Join(strings.Fields(cg.Text()), " ")
			for _, m := range crossRef.FindAllStringSubmatch(text, -1) {
				name := m[1]
				hs, seen := docs[name]
				if !seen {
					hs = headings(t, filepath.Join(root, "docs", name+".md"))
					docs[name] = hs
				}
				if hs == nil {
					t.Errorf("%s: a comment names docs/%s.md, which does not exist", rel, name)
					continue
				}
				sec := m[2] + m[3] + m[4]
				if sec != "" && !hs[sec] && !hs[strings.ReplaceAll(sec, "`", "")] {
					t.Errorf("%s: a comment points at docs/%s.md section %q, which is not a heading there", rel, name, sec)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFailureClasses: the Metrics section lists measure's failure classes,
// all of them, in report order.
func TestFailureClasses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testengine.Root(), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("counted by class \\(`([^`]+)`\\)").FindSubmatch(bytes.Join(bytes.Fields(b), []byte(" ")))
	if m == nil {
		t.Fatal("docs/architecture.md no longer says \"counted by class (`...`)\"")
	}
	var want []string
	for _, c := range measure.ErrorClasses {
		want = append(want, string(c))
	}
	if got := string(m[1]); got != strings.Join(want, " ") {
		t.Errorf("docs/architecture.md lists failure classes %q, measure.ErrorClasses is %q", got, strings.Join(want, " "))
	}
}

// TestNoTestdataShipped: no package a binary links embeds a testdata/
// file (go:embed): test data stays out of what ships. internal/testspec,
// which only tests import (a rule of rules_test.go), is the exception.
func TestNoTestdataShipped(t *testing.T) {
	root := testengine.Root()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.Dir(rel) == filepath.Join("internal", "testspec") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "//go:embed") && strings.Contains(line, "testdata") {
				t.Errorf("%s:%d: %s: a shipped package embeds test data; keep what the binary reads beside the package, outside testdata/", rel, i+1, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
