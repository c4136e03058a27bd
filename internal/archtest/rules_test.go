package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/testengine"
)

// rule is one claim of docs/architecture.md about which package may
// import what. Package names are relative to the module; a name ending in
// "/..." stands for the package and every one under it; a name with a dot
// in its first element is outside the module (github.com/docker/docker/...).
type rule struct {
	claim  string   // the claim, in docs/architecture.md's words
	from   []string // the packages it holds for
	except []string // packages of from it does not hold for
	links  bool     // false: their own imports; true: every package they link (go list -deps)
	not    []string // what they must not import, or link
	lines  int      // >0: their non-test Go files hold fewer lines than this
}

// rules is every layering claim of docs/architecture.md beside its package
// table's order (TestPackageTable). A broken one names the file and the
// import that broke it, and for a linked package the chain of imports
// that brings it in. Tests are not read: a test may link anything.
var rules = []rule{
	{claim: "package launcher starts and stops engines: it links neither what runs load against them nor the simulator",
		from: []string{"launcher"}, links: true, not: []string{"internal/load/bench", "internal/model/...", "launcher/simulated"}},
	{claim: "the real launchers (docker, slurm, kubernetes) link no simulator: the keys and checks they share with it are launcher/simenv's",
		from: []string{"launcher/docker", "launcher/slurm", "launcher/kubernetes"}, links: true, not: []string{"internal/model/...", "launcher/simulated"}},
	{claim: "only launcher/docker (and the tests' helpers) imports the Docker SDK",
		from: []string{"..."}, except: []string{"launcher/docker", "internal/testengine/..."}, not: []string{"github.com/docker/docker/..."}},
	{claim: "only launcher/kinds imports launcher/docker",
		from: []string{"..."}, except: []string{"launcher/kinds"}, not: []string{"launcher/docker"}},
	{claim: "only cmd/servetune imports launcher/kinds",
		from: []string{"..."}, except: []string{"cmd/servetune"}, not: []string{"launcher/kinds"}},
	{claim: "tuner links neither the simulator nor the calibration, nor the Docker SDK",
		from: []string{"tuner"}, links: true, not: []string{"internal/model/...", "launcher/simulated", "launcher/docker", "github.com/docker/docker/..."}},
	{claim: "tuner stays under 2,500 lines: a part with its own concern is a subpackage",
		from: []string{"tuner"}, lines: 2500},
	{claim: "the spec, tuner/spec, names no launcher type and runs nothing",
		from: []string{"tuner/spec"}, links: true, not: []string{"launcher/...", "trial", "tuner", "tuner/sampler", "tuner/guided", "internal/model/..."}},
	{claim: "what reads stored studies (report, ui) links no sampler, simulator or launcher",
		from: []string{"internal/present/report", "internal/present/ui"}, links: true,
		not: []string{"github.com/c-bata/goptuna/...", "tuner", "tuner/sampler", "tuner/guided", "tuner/memory", "internal/model/...", "launcher/..."}},
	{claim: "only tests import internal/testspec: its specs stay out of the shipped binaries",
		from: []string{"..."}, not: []string{"internal/testspec"}},
	{claim: "nothing under internal/ imports the packages that run a study (tuner and its runners)",
		from: []string{"internal/..."}, not: []string{"tuner", "tuner/sampler", "tuner/guided", "tuner/memory", "tuner/whatif", "tuner/samplerbench"}},
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Module     *struct{ Path string }
}

// graph runs go list over the module's packages and everything they link,
// tests excluded, keyed by import path.
func graph(t *testing.T, root string) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,Imports,Module", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string]*pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		p := &pkg{}
		if err := dec.Decode(p); err != nil {
			t.Fatal(err)
		}
		all[p.ImportPath] = p
	}
	return all
}

// full is a rule's package name as an import path.
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

// importSite is the file and line of p's import of dep, "p" when no file
// of p spells it (an import through cgo's preamble).
func importSite(root string, p *pkg, dep string) string {
	for _, f := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
		path := filepath.Join(p.Dir, f)
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, im := range af.Imports {
			if v, _ := strconv.Unquote(im.Path.Value); v == dep {
				r, err := filepath.Rel(root, path)
				if err != nil {
					r = path
				}
				return fmt.Sprintf("%s:%d", r, fset.Position(im.Pos()).Line)
			}
		}
	}
	return rel(p.ImportPath)
}

// chain is the shortest path of imports from p to a package matching one
// of names, nil when p links none.
func chain(all map[string]*pkg, p string, names []string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != p && matchesAny(cur, names) {
			var path []string
			for at := cur; at != ""; at = prev[at] {
				path = append([]string{at}, path...)
			}
			return path
		}
		q := all[cur]
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

// lines counts the lines of p's non-test Go files.
func lines(t *testing.T, p *pkg) int {
	n := 0
	for _, f := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
		b, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n
}

// TestLayering checks every rule of the table against go list.
func TestLayering(t *testing.T) {
	root := testengine.Root()
	all := graph(t, root)
	var ours []string
	for p, q := range all {
		if q.Module != nil && q.Module.Path == module {
			ours = append(ours, p)
		}
	}
	slices.Sort(ours)
	for _, r := range rules {
		held := 0
		for _, p := range ours {
			if !matchesAny(p, r.from) || matchesAny(p, r.except) {
				continue
			}
			held++
			q := all[p]
			if r.lines > 0 {
				if n := lines(t, q); n >= r.lines {
					t.Errorf("%s has %d non-test lines, want under %d (%s)", rel(p), n, r.lines, r.claim)
				}
			}
			if !r.links {
				for _, im := range q.Imports {
					if matchesAny(im, r.not) {
						t.Errorf("%s imports %s (%s)", importSite(root, q, im), im, r.claim)
					}
				}
				continue
			}
			if path := chain(all, p, r.not); path != nil {
				var steps []string
				for i := 0; i+1 < len(path); i++ {
					steps = append(steps, importSite(root, all[path[i]], path[i+1])+" imports "+path[i+1])
				}
				t.Errorf("%s links %s (%s): %s", rel(p), path[len(path)-1], r.claim, strings.Join(steps, ", "))
			}
		}
		if held == 0 {
			t.Errorf("the rule %q holds for no package: %v", r.claim, r.from)
		}
	}
}

// TestLayeringCatches: the check finds a broken rule and names the file
// and import that broke it, for an import and for a link alike.
func TestLayeringCatches(t *testing.T) {
	root := testengine.Root()
	all := graph(t, root)
	// tuner imports launcher directly, and links internal/serving/engine.
	q := all[module+"/tuner"]
	if !slices.Contains(q.Imports, module+"/launcher") {
		t.Fatal("tuner no longer imports launcher: pick another import for this test")
	}
	site := importSite(root, q, module+"/launcher")
	if !strings.HasPrefix(site, "tuner/") || !strings.Contains(site, ".go:") {
		t.Errorf("import site %q, want tuner/FILE.go:LINE", site)
	}
	path := chain(all, module+"/tuner", []string{"internal/serving/engine"})
	if len(path) < 2 || path[0] != module+"/tuner" || path[len(path)-1] != module+"/internal/serving/engine" {
		t.Errorf("chain %v, want tuner ... internal/serving/engine", path)
	}
	if chain(all, module+"/internal/yamlpos", []string{"tuner"}) != nil {
		t.Error("internal/yamlpos links tuner?")
	}
}
