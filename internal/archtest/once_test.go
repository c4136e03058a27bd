package archtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
)

// flagsSpelledOnce checks that every flag an engine spells a setting with
// (the tunable ones and the engine-specific server flags) appears in one
// non-test Go file of the module, comments included: engine's table,
// internal/serving/engine/flags.go. Everything else asks the table
// (engine.Flag, Render, ServeCommand).
func flagsSpelledOnce(tr *tree) []string {
	const home = "internal/serving/engine/flags.go"
	var flags []string
	for _, name := range append(engine.Names(), "served_model_name", "max_prefill_tokens", "cuda_graph_max_bs", "mixed_chunk", "enable_metrics") {
		for _, f := range engine.Spellings(name) {
			if !slices.Contains(flags, f) {
				flags = append(flags, f)
			}
		}
	}
	var out []string
	sources := tr.sources()
	for _, f := range flags {
		re := regexp.MustCompile(regexp.QuoteMeta(f) + `($|[^a-z0-9-])`)
		inHome := false
		for _, src := range sources {
			loc := re.FindIndex(src.src)
			if loc == nil {
				continue
			}
			if src.path == home {
				inHome = true
				continue
			}
			out = append(out, fmt.Sprintf("%s:%d spells the engine flag %s; ask engine's table (%s: engine.Flag, Render, ServeCommand)", src.path, lineOf(src.src, loc[0]), f, home))
		}
		if !inHome {
			out = append(out, fmt.Sprintf("%s no longer spells the engine flag %s", home, f))
		}
	}
	return out
}

// quoterName is a declared function whose name says it quotes for a shell.
var quoterName = regexp.MustCompile(`func (\([^)]*\) )?\w*(?i:shell_?(quote|escape)|sh_?quote)\w*\(`)

// shellQuotedOnce checks that engine.ShellQuote is the only shell quoter:
// any other writer of shell text calls it (no wrapper of its own either).
// A second one is found by the single quote's escape, which every POSIX
// quoter spells, or by its name.
func shellQuotedOnce(tr *tree) []string {
	const home = "internal/serving/engine/command.go"
	marks := [][]byte{[]byte("`'\\''`"), []byte(`"'\\''"`), []byte(`"$'"`)}
	var out []string
	inHome := false
	for _, f := range tr.sources() {
		at, what := -1, ""
		for _, m := range marks {
			if i := bytes.Index(f.src, m); i >= 0 {
				at, what = i, string(m)
				break
			}
		}
		if at < 0 {
			if loc := quoterName.FindIndex(f.src); loc != nil {
				at, what = loc[0], string(f.src[loc[0]:loc[1]])
			}
		}
		if at < 0 {
			continue
		}
		if f.path == home {
			inHome = true
			continue
		}
		out = append(out, fmt.Sprintf("%s:%d: %s: a second shell quoter; call engine.ShellQuote (%s)", f.path, lineOf(f.src, at), what, home))
	}
	if !inHome {
		out = append(out, fmt.Sprintf("%s holds no shell quoter any more", home))
	}
	return out
}

// markerAlias is a declaration that renames the redaction marker.
var markerAlias = regexp.MustCompile(`(const|var)\s+\w+(\s+string)?\s*=\s*redact\.Redacted\b`)

// redactionMarkerOnce checks that redact.Redacted is the only spelling of
// a redacted value in the code: the others once used appear in no non-test
// Go file, and no package but internal/redact spells this one or names an
// alias of it.
func redactionMarkerOnce(tr *tree) []string {
	var out []string
	for _, f := range tr.sources() {
		for _, other := range []string{"<redacted>", "<REDACTED>", `"***"`, `"xxxxx"`, `"?…"`, `"…"`} {
			if i := bytes.Index(f.src, []byte(other)); i >= 0 {
				out = append(out, fmt.Sprintf("%s:%d spells a redacted value %s; use redact.Redacted", f.path, lineOf(f.src, i), other))
			}
		}
		if path.Dir(f.path) == "internal/redact" {
			continue
		}
		if i := bytes.Index(f.src, []byte(redact.Redacted)); i >= 0 {
			out = append(out, fmt.Sprintf("%s:%d spells the marker %s; use redact.Redacted", f.path, lineOf(f.src, i), redact.Redacted))
		}
		if loc := markerAlias.FindIndex(f.src); loc != nil {
			out = append(out, fmt.Sprintf("%s:%d: %s: an alias of the marker; use redact.Redacted", f.path, lineOf(f.src, loc[0]), f.src[loc[0]:loc[1]]))
		}
	}
	return out
}

// serveTwins are what a second loopback test or serve sequence spells: an
// address asked IsLoopback, a declared loopback function, a listener
// served (httpserve.Serve or http.Server.Serve: ListenAndServe listens and
// says where), a server shut down.
var serveTwins = regexp.MustCompile(`\.IsLoopback\(\)|func (\([^)]*\) )?\w*[Ll]oopback\w*\(|\.Shutdown\(\w+\)|\bhttpserve\.Serve\(|\.Serve\(ln\w*\)`)

// serveSequenceOnce checks that internal/httpserve holds the only
// loopback test and the only listen, serve and shutdown sequence of an
// http.Server: no other non-test Go file spells one of serveTwins.
func serveSequenceOnce(tr *tree) []string {
	var out []string
	for _, f := range tr.sourcesOutside("internal/httpserve") {
		// Every twin spells one of these: the lines of other files need no look.
		if !bytes.Contains(f.src, []byte("oopback")) && !bytes.Contains(f.src, []byte(".Shutdown(")) && !bytes.Contains(f.src, []byte(".Serve(")) {
			continue
		}
		for i, line := range bytes.Split(f.src, []byte("\n")) {
			if m := serveTwins.Find(line); m != nil {
				out = append(out, fmt.Sprintf("%s:%d: %s: use httpserve.IsLoopback or httpserve.ListenAndServe", f.path, i+1, m))
			}
		}
	}
	return out
}

// labelCodecOnce checks that the reaping label's keys (the namespaced ones
// and the ones an older servetune wrote) are spelled in launcher/label.go
// alone: every kind asks launcher.Label. internal/serving/kube labels a
// Deployment with the same keys for a person (nothing reaps it, and it
// sits below launcher).
func labelCodecOnce(tr *tree) []string {
	marks := []string{`"servetune.io/`, `"servetune.managed"`, `"servetune.study"`, `"servetune.trial"`, `"servetune.owner"`,
		`"SERVETUNE_STUDY"`, `"SERVETUNE_TRIAL"`, `"SERVETUNE_OWNER"`, `"SERVETUNE_LABEL"`, `"servetune:"`}
	var out []string
	for _, f := range tr.sources() {
		if f.path == "launcher/label.go" || f.path == "internal/serving/kube/kube.go" {
			continue
		}
		for _, m := range marks {
			if i := bytes.Index(f.src, []byte(m)); i >= 0 {
				out = append(out, fmt.Sprintf("%s:%d spells the label key %s; use launcher.Label", f.path, lineOf(f.src, i), m))
			}
		}
	}
	return out
}

// targetOnce checks that openai.Target is the one type that holds a
// server's base URL beside an API key (no other struct declares both),
// and that the benchmark and the quality gate both use it.
func targetOnce(tr *tree) []string {
	var out []string
	for _, f := range tr.sourcesOutside("internal/load/openai") {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			var url, key string
			for _, fl := range st.Fields.List {
				for _, name := range fl.Names {
					l := strings.ToLower(name.Name)
					if strings.Contains(l, "baseurl") {
						url = name.Name
					}
					if l == "apikey" {
						key = name.Name
					}
				}
			}
			if url != "" && key != "" {
				out = append(out, fmt.Sprintf("%s: a struct holds a base URL (%s) and an API key (%s); use openai.Target", tr.at(st.Pos()), url, key))
			}
			return true
		})
	}
	for _, user := range []string{"internal/load/bench", "internal/load/quality"} {
		if p := tr.pkgs[full(user)]; p == nil || !slices.Contains(p.Imports, full("internal/load/openai")) {
			out = append(out, fmt.Sprintf("%s/ no longer imports internal/load/openai", user))
		}
	}
	return out
}

// ownVocabulary are files whose metric names are another vocabulary
// that happens to share words with the metric table's.
var ownVocabulary = map[string]string{
	// The fidelity suite's metrics are the public runs' fields (ttft,
	// itl, e2e, throughput: docs/fidelity.md), not a level's.
	"internal/model/fidelity/suite.go": "the fidelity suite's metrics",
}

// metricNamesOnce checks that the metric vocabulary stays in the table
// (internal/load/measure/metric.go): no other file switches on a metric's
// or a latency series' name, lists the latency series, or lists a copy of
// the table. Naming a metric to show or to rank by (a report's columns, a
// preference's objectives) is a lookup the table answers, and is allowed.
func metricNamesOnce(tr *tree) []string {
	names, series := map[string]bool{}, map[string]bool{}
	metrics, sr := measure.Vocabulary()
	for _, n := range metrics {
		names[n] = true
	}
	for _, n := range sr {
		series[n] = true
	}
	tableLen := len(measure.Metrics())
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	var out []string
	for _, f := range tr.sources() {
		if f.path == "internal/load/measure/metric.go" || ownVocabulary[f.path] != "" {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				for _, e := range n.List {
					if s, ok := lit(e); ok && (names[s] || series[s]) {
						out = append(out, fmt.Sprintf("%s: case %q: a metric's name switched on outside internal/load/measure/metric.go", tr.at(e.Pos()), s))
					}
				}
			case *ast.CompositeLit:
				var inSeries, inTable int
				ast.Inspect(n, func(m ast.Node) bool {
					if e, ok := m.(ast.Expr); ok {
						if s, ok := lit(e); ok {
							if series[s] {
								inSeries++
							}
							if names[s] {
								inTable++
							}
						}
					}
					return true
				})
				if inSeries >= 2 || inTable > tableLen/2 {
					out = append(out, fmt.Sprintf("%s: a list of %d latency series and %d metrics: read the table (internal/load/measure/metric.go)", tr.at(n.Pos()), inSeries, inTable))
					return false
				}
			}
			return true
		})
	}
	return out
}

// statisticsOnce checks that no package but internal/load/measure defines
// a median, percentile, quantile, quartile, variance, Welch, mean-interval
// or bootstrap helper (methods on a type of their own, such as a
// histogram's quantile, are another estimator's and allowed), nor computes
// one inline: a value picked at a fraction of a count
// (sorted[len(sorted)/4]), or a running sum compared with half a total (a
// weighted median).
func statisticsOnce(tr *tree) []string {
	words := []string{"median", "percentile", "quantile", "quartile", "variance", "welch", "meanci", "bootstrap", "stddev"}
	// byFraction is an expression divided by 2 or 4.
	byFraction := func(e ast.Expr) bool {
		b, ok := ast.Unparen(e).(*ast.BinaryExpr)
		if !ok || b.Op != token.QUO {
			return false
		}
		lit, ok := ast.Unparen(b.Y).(*ast.BasicLit)
		return ok && lit.Kind == token.INT && (lit.Value == "2" || lit.Value == "4")
	}
	var out []string
	for _, f := range tr.sources() {
		if strings.HasPrefix(f.path, "internal/load/measure/") {
			continue
		}
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			name := strings.ToLower(fd.Name.Name)
			for _, w := range words {
				if strings.Contains(name, w) {
					out = append(out, fmt.Sprintf("%s: func %s: use internal/load/measure's statistics", tr.at(fd.Pos()), fd.Name.Name))
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.IndexExpr:
				if byFraction(n.Index) {
					out = append(out, fmt.Sprintf("%s: %s: a value at a fraction of a count, a quantile by hand: use internal/load/measure's statistics", tr.at(n.Pos()), f.src[tr.fset.Position(n.Pos()).Offset:tr.fset.Position(n.End()).Offset]))
				}
			case *ast.BinaryExpr:
				if (n.Op == token.GEQ || n.Op == token.GTR) && byFraction(n.Y) {
					out = append(out, fmt.Sprintf("%s: %s: a sum compared with half a total, a weighted median by hand: use internal/load/measure's statistics", tr.at(n.Pos()), f.src[tr.fset.Position(n.Pos()).Offset:tr.fset.Position(n.End()).Offset]))
				}
			}
			return true
		})
	}
	return out
}
