package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// layer is a claim about which packages may import, or link, what.
// Package names are as in full: relative to the module, "x/..." for x and
// every package under it, a dotted first element for outside the module.
// Tests are not read: a test may link anything.
type layer struct {
	from   []string // the packages it holds for
	except []string // packages of from it does not hold for
	links  bool     // false: their own imports; true: every package they link (go list -deps)
	not    []string // what they must not import, or link
}

// check names each import that breaks the claim by its file and line,
// and for a linked package the chain of imports that brings it in.
func (l layer) check(tr *tree) []string {
	var out []string
	held := 0
	for _, p := range tr.ours {
		if !matchesAny(p, l.from) || matchesAny(p, l.except) {
			continue
		}
		held++
		if !l.links {
			for _, im := range tr.pkgs[p].Imports {
				if matchesAny(im, l.not) {
					out = append(out, fmt.Sprintf("%s imports %s", tr.importSite(p, im), short(im)))
				}
			}
			continue
		}
		if chain := tr.chain(p, l.not); chain != nil {
			var steps []string
			for i := 0; i+1 < len(chain); i++ {
				steps = append(steps, tr.importSite(chain[i], chain[i+1])+" imports "+short(chain[i+1]))
			}
			out = append(out, fmt.Sprintf("%s links %s: %s", rel(p), short(chain[len(chain)-1]), strings.Join(steps, ", ")))
		}
	}
	if held == 0 {
		out = append(out, fmt.Sprintf("the rule holds for no package of the module: %v", l.from))
	}
	return out
}

// under is the claim that a package's non-test Go files (those go list
// builds) hold fewer than n lines.
type under struct {
	pkg string
	n   int
}

func (u under) check(tr *tree) []string {
	p := tr.pkgs[full(u.pkg)]
	if p == nil {
		return []string{u.pkg + " is not a package of the module"}
	}
	built := append(slices.Clone(p.GoFiles), p.CgoFiles...)
	total, longest, most := 0, "", 0
	for _, f := range tr.files {
		if f.test || path.Dir(f.path) != u.pkg || !slices.Contains(built, path.Base(f.path)) {
			continue
		}
		n := bytes.Count(f.src, []byte("\n"))
		total += n
		if n > most {
			longest, most = f.path, n
		}
	}
	if total >= u.n {
		return []string{fmt.Sprintf("%s has %d non-test lines, want under %d (the longest file %s, %d lines)", u.pkg, total, u.n, longest, most)}
	}
	return nil
}

// tableRow is a row of docs/architecture.md's package table.
type tableRow struct {
	pkg  string
	line int
}

var tableRowRE = regexp.MustCompile("^\\| `([a-z0-9/]+)` \\|")

// packageRows reads the package column of docs/architecture.md's package
// table, top to bottom.
func packageRows(doc []byte) []tableRow {
	var rows []tableRow
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if m := tableRowRE.FindStringSubmatch(sc.Text()); m != nil {
			rows = append(rows, tableRow{m[1], n})
		}
	}
	return rows
}

// packageTable checks docs/architecture.md's package table: every package
// of the module is a row of it once, every row is a package, and a
// package imports only packages listed below it.
func packageTable(tr *tree) []string {
	const doc = "docs/architecture.md"
	var out []string
	at := map[string]int{}
	for i, r := range packageRows(tr.docs[doc]) {
		if _, dup := at[r.pkg]; dup {
			out = append(out, fmt.Sprintf("%s:%d lists %s twice", doc, r.line, r.pkg))
		}
		at[r.pkg] = i
		if !slices.Contains(tr.ours, full(r.pkg)) {
			out = append(out, fmt.Sprintf("%s:%d lists %s, which is not a package of the module", doc, r.line, r.pkg))
		}
	}
	for _, p := range tr.ours {
		i, ok := at[rel(p)]
		if !ok {
			out = append(out, fmt.Sprintf("%s/: package %s is missing from %s's package table", rel(p), rel(p), doc))
			continue
		}
		for _, im := range tr.pkgs[p].Imports {
			if j, ok := at[rel(im)]; ok && strings.HasPrefix(im, module+"/") && j <= i {
				out = append(out, fmt.Sprintf("%s imports %s, which %s lists above %s", tr.importSite(p, im), short(im), doc, rel(p)))
			}
		}
	}
	return out
}
