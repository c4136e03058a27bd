package archtest

import (
	"fmt"
	"regexp"
	"slices"

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
