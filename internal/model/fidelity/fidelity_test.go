package fidelity

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSuiteFile checks the repository's suite: it loads, every source says
// where it is and which split it belongs to, and every run's configuration
// is one the simulator accepts.
func TestSuiteFile(t *testing.T) {
	s, err := Load("../sim/testdata/fidelity/runs.json")
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]int{}
	for _, r := range s.Runs {
		if _, err := s.config(r); err != nil {
			t.Errorf("run %q: %v", r.ID, err)
		}
		engines[r.Engine]++
	}
	t.Logf("%d runs from %d sources, by engine %v", len(s.Runs), len(s.Sources), engines)
	if _, err := ReadRecorded("../sim/medians.json"); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRejectsBadRuns(t *testing.T) {
	good := `{"sources": {"s": {"what": "w", "url": "https://example.org", "split": "fit"}}, "runs": [
		{"id": "a", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": [], "workload": {"in": 32, "out": 16, "requests": 4}, "stat": "mean", "measured": {"e2e_ms": 100}, "regimes": ["light"]}]}`
	tests := []struct{ name, from, to, want string }{
		{"good", "", "", ""},
		{"split", `"split": "fit"`, `"split": "train"`, `split "train"`},
		{"no where", `"url": "https://example.org", `, ``, "want a url"},
		{"unknown source", `"source": "s"`, `"source": "x"`, `unknown source "x"`},
		{"engine", `"engine": "vllm"`, `"engine": "trt"`, `engine "trt"`},
		{"no figure", `"measured": {"e2e_ms": 100}`, `"measured": {}`, "no measured figure"},
		{"regime", `"regimes": ["light"]`, `"regimes": ["busy"]`, `regime "busy"`},
		{"run split", `"regimes": ["light"]`, `"regimes": ["light"], "split": "test"`, `split "test"`},
		{"run held out", `"regimes": ["light"]`, `"regimes": ["light"], "split": "held-out"`, ""},
		{"both loads", `"requests": 4`, `"requests": 4, "stages": [[2, 10]]`, "either Poisson stages or a request count"},
		{"prompts", `"requests": 4`, `"requests": 4, "prompts": 2`, ""},
		{"range ratio", `"requests": 4`, `"requests": 4, "range_ratio": 1`, "want a ratio in [0, 1)"},
		{"range ratio spread", `"requests": 4`, `"requests": 4, "range_ratio": 0.5`, ""},
		{"vllm zero draws", `"requests": 4`, `"requests": 4, "range_ratio": 0`, "draws lengths of 0"},
		{"negative prompts", `"requests": 4`, `"requests": 4, "prompts": -1`, "workload prompts -1"},
		{"prompt groups", `"requests": 4`, `"requests": 4, "prompts": 4, "prompt_groups": 2, "system_prompt": 16`, ""},
		{"groups alone", `"requests": 4`, `"requests": 4, "prompts": 4, "prompt_groups": 2`, "want both positive"},
		{"more groups than prompts", `"requests": 4`, `"requests": 4, "prompts": 1, "prompt_groups": 2, "system_prompt": 16`, "at most the 1 cycled prompts"},
		{"system prompt too long", `"requests": 4`, `"requests": 4, "prompts": 4, "prompt_groups": 2, "system_prompt": 32`, "fewer tokens than the prompt's 32"},
		{"unscored burst", `"regimes": ["light"]`, `"regimes": ["light"], "unscored": "lengths are means"`, ""},
		{"unscored poisson", `"requests": 4}, "stat": "mean", "measured": {"e2e_ms": 100}, "regimes": ["light"]`,
			`"stages": [[2, 10]]}, "stat": "mean", "measured": {"e2e_ms": 100}, "regimes": ["light"], "unscored": "x"`, "only a run of every request at once"},
		{"unscored capped", `"requests": 4}, "stat": "mean", "measured": {"e2e_ms": 100}, "regimes": ["light"]`,
			`"requests": 4, "concurrency": 2}, "stat": "mean", "measured": {"e2e_ms": 100}, "regimes": ["light"], "unscored": "x"`, "only a run of every request at once"},
		{"unscored spaces", `"regimes": ["light"]`, `"regimes": ["light"], "unscored": " x"`, "without surrounding space"},
		{"unknown field", `"stat": "mean"`, `"stat": "mean", "colour": 1`, "unknown field"},
		{"disaggregated", `"regimes": ["light"]`, `"regimes": [], "disaggregated": {"prefill_replicas": 1, "prefill_tp": 1, "decode_replicas": 1, "decode_tp": 1, "kv_link": "roce"}`, ""},
		{"disaggregated with regimes", `"regimes": ["light"]`, `"regimes": ["light"], "disaggregated": {"prefill_replicas": 1, "prefill_tp": 1, "decode_replicas": 1, "decode_tp": 1, "kv_link": "roce"}`, "leave regimes empty"},
		{"disaggregated link", `"regimes": ["light"]`, `"regimes": [], "disaggregated": {"prefill_replicas": 1, "prefill_tp": 1, "decode_replicas": 1, "decode_tp": 1, "kv_link": "wifi"}`, `kv link "wifi"`},
		{"disaggregated sides", `"regimes": ["light"]`, `"regimes": [], "disaggregated": {"prefill_replicas": 0, "prefill_tp": 1, "decode_replicas": 1, "decode_tp": 1, "kv_link": "roce"}`, "must be positive"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "runs.json")
		if err := os.WriteFile(path, []byte(strings.Replace(good, tt.from, tt.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckSlack(t *testing.T) {
	rec := Recorded{Regimes: Table{"moderate": {"itl": {N: 3, Median: 0.05}}, "light": {"e2e": {N: 2, Median: 0.03}}}}
	ok := Table{"moderate": {"itl": {N: 3, Median: 0.069}}, "light": {"e2e": {N: 2, Median: 0.01}}}
	if bad := Check(ok, rec); len(bad) > 0 {
		t.Errorf("within the slack: %v", bad)
	}
	worse := Table{"moderate": {"itl": {N: 3, Median: 0.071, Run: "r1"}}}
	bad := Check(worse, rec)
	if len(bad) != 2 || !strings.Contains(bad[0]+bad[1], "moderate itl: median error 7.1%, recorded 5.0%") ||
		!strings.Contains(bad[0]+bad[1], "light e2e: recorded (2 runs) but no longer measured") {
		t.Errorf("Check = %q", bad)
	}
}

// TestMainRecordsThenCatchesDrift runs the command's whole path on a small
// suite through the real simulator: record the medians, check against them
// (passes), then against medians 3 points better than measured (fails).
func TestMainRecordsThenCatchesDrift(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "runs.json")
	os.WriteFile(suite, []byte(`{"sources": {"s": {"what": "w", "url": "https://example.org", "split": "held-out"}}, "runs": [
		{"id": "a", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": ["--max-model-len", "4096"], "workload": {"in": 32, "out": 128, "requests": 8}, "stat": "mean",
		 "measured": {"e2e_ms": 900, "itl_ms": 7}, "regimes": ["light"]},
		{"id": "b", "source": "s", "engine": "sglang", "version": "1", "gpu": "H200", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": ["--context-length", "4096"], "workload": {"in": 512, "out": 64, "stages": [[4, 40]]}, "stat": "median",
		 "measured": {"ttft_ms": 40, "itl_ms": 6, "output_tok_s": 250}, "regimes": ["moderate"]}]}`), 0o644)
	medians, table := filepath.Join(dir, "medians.json"), filepath.Join(dir, "out", "table.md")
	var out, errs bytes.Buffer
	if code := Main(&out, &errs, suite, medians, table, true); code != 0 {
		t.Fatalf("update: exit %d: %s", code, errs.String())
	}
	if code := Main(&out, &errs, suite, medians, table, false); code != 0 {
		t.Fatalf("check against its own record: exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"light", "moderate", "throughput", "held-out"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if b, err := os.ReadFile(table); err != nil || !strings.Contains(string(b), "| a | s (held-out) |") {
		t.Errorf("table file: %v\n%s", err, b)
	}
	rec, err := ReadRecorded(medians)
	if err != nil {
		t.Fatal(err)
	}
	st := rec.Regimes["light"]["e2e"]
	st.Median -= 0.03
	rec.Regimes["light"]["e2e"] = st
	b, _ := json.Marshal(rec)
	os.WriteFile(medians, b, 0o644)
	errs.Reset()
	if code := Main(&out, &errs, suite, medians, "", false); code != 1 || !strings.Contains(errs.String(), "light e2e: median error") {
		t.Errorf("drift: exit %d, stderr %q", code, errs.String())
	}
	if code := Main(&out, &errs, filepath.Join(dir, "none.json"), medians, "", false); code != 2 {
		t.Errorf("missing suite: exit %d", code)
	}
}

// TestSpeculativeRunsAreTheirOwnRegime runs a plain and a speculative run
// through the real simulator: the speculative one counts in the
// speculative regime alone, so adding it moves no other regime.
func TestSpeculativeRunsAreTheirOwnRegime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.json")
	run := `{"id": "%s", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 2, "flags": [%s"--max-model-len", "2048", "--max-num-seqs", "1"], "workload": {"in": 76, "out": 64, "requests": 4},
		 "stat": "mean", "measured": {"output_tok_s": 200}, "regimes": ["light"]}`
	spec := `"--speculative-config", "{\"method\":\"eagle3\",\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\",\"num_speculative_tokens\":2}", "--spec-acceptance", "0.7", `
	_, results := loadSuite(t, path,
		strings.Replace(strings.Replace(run, "%s", "plain", 1), "%s", "", 1),
		strings.Replace(strings.Replace(run, "%s", "spec", 1), "%s", spec, 1))
	if got := strings.Join(results[1].Regimes, ","); got != RegimeSpec {
		t.Errorf("speculative run's regimes %q, want only %q", got, RegimeSpec)
	}
	if results[1].Predicted.Throughput <= results[0].Predicted.Throughput {
		t.Errorf("batch 1 with drafts accepted at 0.7: %.1f tok/s, not above the plain run's %.1f", results[1].Predicted.Throughput, results[0].Predicted.Throughput)
	}
	tab := Tabulate(results, "")
	for _, g := range []string{"light", RegimeTP, All} {
		if n := tab[g]["throughput"].N; n != 1 {
			t.Errorf("%s throughput: %d runs, want the plain one alone", g, n)
		}
	}
	if n := tab[RegimeSpec]["throughput"].N; n != 1 {
		t.Errorf("speculative throughput: %d runs, want 1", n)
	}
	if got := tab.Regimes(); !slices.Equal(got, []string{"light", RegimeTP, RegimeSpec, All}) {
		t.Errorf("regimes in order %v", got)
	}
}

// TestDisaggregatedRegime: the suite's disaggregated runs are simulated as
// deployments, tabulated under their own regime and left out of All, so
// the aggregated regimes' figures stay the aggregated engine's.
func TestDisaggregatedRegime(t *testing.T) {
	s, err := Load("../sim/testdata/fidelity/runs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dis, agg []Result
	for _, r := range s.Runs {
		res, err := s.Simulate(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Disaggregated != nil {
			if len(res.Regimes) != 1 || res.Regimes[0] != RegimeDisagg {
				t.Errorf("run %q: regimes %v", r.ID, res.Regimes)
			}
			dis = append(dis, res)
		} else {
			agg = append(agg, res)
		}
	}
	if len(dis) < 3 {
		t.Fatalf("%d disaggregated runs, want at least 3", len(dis))
	}
	both, alone := Tabulate(append(agg, dis...), ""), Tabulate(agg, "")
	if both[RegimeDisagg]["itl"].N != len(dis) || both[All]["itl"] != alone[All]["itl"] {
		t.Errorf("disaggregated itl %+v; all %+v against %+v without them", both[RegimeDisagg]["itl"], both[All]["itl"], alone[All]["itl"])
	}
}

// TestPromptsCycleThroughTheCache simulates one Poisson run twice, every
// prompt new and then cycling through 4 prompts: with the engine's prefix
// cache on (vLLM's default) the cycled prompts' prefill is served from
// the cache, so the first token comes sooner, and nothing else differs.
func TestPromptsCycleThroughTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	s, _ := loadSuite(t, path, `
		{"id": "a", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": ["--max-model-len", "8192"], "workload": {"in": 4000, "out": 32, "stages": [[4, 80]]}, "stat": "mean",
		 "measured": {"ttft_ms": 100}, "regimes": ["moderate"]}`)
	fresh, err := s.Simulate(s.Runs[0])
	if err != nil {
		t.Fatal(err)
	}
	r := s.Runs[0]
	r.Workload.Prompts = 4
	cycled, err := s.Simulate(r)
	if err != nil {
		t.Fatal(err)
	}
	// A 4,000-token prefill on one H100 takes tens of milliseconds; a
	// cached one computes its last partial page alone.
	if !(cycled.Predicted.TTFT < fresh.Predicted.TTFT/2) {
		t.Errorf("TTFT with 4 cycled prompts %.1f ms, every prompt new %.1f ms: want under half", cycled.Predicted.TTFT, fresh.Predicted.TTFT)
	}
	off := r
	off.Flags = append(append([]string{}, r.Flags...), "--no-enable-prefix-caching")
	uncached, err := s.Simulate(off)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(uncached.Predicted.TTFT/fresh.Predicted.TTFT-1) > 0.01 {
		t.Errorf("prefix cache off: TTFT %.1f ms with cycled prompts, %.1f ms with new ones: want the same", uncached.Predicted.TTFT, fresh.Predicted.TTFT)
	}
}

// TestPromptGroupsShareASystemPrompt: with prompt groups, cycled prompt p
// is in group p mod the groups, its first system_prompt tokens the
// group's.
func TestPromptGroupsShareASystemPrompt(t *testing.T) {
	w := Workload{In: 575, Out: 248, Requests: 25, Prompts: 10, PromptGroups: 5, SystemPrompt: 100}
	reqs, _, _ := w.requests("x", "vllm")
	for i, q := range reqs {
		if q.PrefixID != i%10 || q.PrefixTokens != 575 || q.GroupID != i%10%5 || q.GroupTokens != 100 {
			t.Fatalf("request %d: prefix %d of %d tokens, group %d of %d: want prefix %d, group %d of 100", i, q.PrefixID, q.PrefixTokens, q.GroupID, q.GroupTokens, i%10, i%5)
		}
	}
	w.PromptGroups, w.SystemPrompt = 0, 0
	if reqs, _, _ = w.requests("x", "vllm"); reqs[3].GroupTokens != 0 {
		t.Errorf("no groups: request 3 has %d group tokens", reqs[3].GroupTokens)
	}
}

// TestUnscoredRuns: an unscored run is simulated and listed with its
// reason, but counts in no regime's figures nor in the recorded medians,
// and the header says how many runs are scored.
func TestUnscoredRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.json")
	run := `{"id": "%s", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 2, "flags": ["--max-model-len", "4096"], "workload": {"in": 200, "out": 200, "requests": 64},
		 "stat": "mean", "measured": {"output_tok_s": %s}, "regimes": ["offline"]%s}`
	one := func(id, tok, extra string) string {
		return strings.Replace(strings.Replace(strings.Replace(run, "%s", id, 1), "%s", tok, 1), "%s", extra, 1)
	}
	_, results := loadSuite(t, path, one("scored", "2000", ""), one("means", "500", `, "unscored": "ShareGPT lengths known only as means"`))
	if len(results) != 2 || results[1].Predicted.Throughput == 0 {
		t.Fatalf("the unscored run is still simulated: %+v", results)
	}
	tab := Tabulate(results, "")
	for _, g := range []string{"offline", RegimeTP, All} {
		if st := tab[g]["throughput"]; st.N != 1 || st.Run != "scored" {
			t.Errorf("%s throughput: %+v, want the scored run alone", g, st)
		}
	}
	if st := TabulateByLoad(results)[RegimeTP]["offline"]["throughput"]; st.N != 1 {
		t.Errorf("tp>1 within offline: %+v, want the scored run alone", st)
	}
	medians, table := filepath.Join(dir, "medians.json"), filepath.Join(dir, "table.md")
	var out, errs bytes.Buffer
	if code := Main(&out, &errs, path, medians, table, true); code != 0 {
		t.Fatalf("update: exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "2 runs from 1 sources, 1 scored and 1 unscored") {
		t.Errorf("header:\n%s", out.String())
	}
	rec, err := ReadRecorded(medians)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Runs != 1 || rec.Unscored != 1 || rec.Regimes[All]["throughput"].N != 1 || rec.ByLoad[RegimeTP]["offline"]["throughput"].N != 1 {
		t.Errorf("recorded: %+v", rec)
	}
	b, _ := os.ReadFile(table)
	if !strings.Contains(string(b), "| means | s (held-out) |") || !strings.Contains(string(b), "offline, tp>1; unscored: ShareGPT lengths known only as means | throughput 500 / ") {
		t.Errorf("table lacks the unscored run with its reason and figures:\n%s", b)
	}
}

// loadSuite writes runs (JSON objects of source "s") to path as a suite,
// loads it and simulates every run.
func loadSuite(t *testing.T, path string, runs ...string) (*Suite, []Result) {
	t.Helper()
	doc := `{"sources": {"s": {"what": "w", "url": "https://example.org", "split": "held-out"}}, "runs": [` + strings.Join(runs, ", ") + `]}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	results, err := s.SimulateAll()
	if err != nil {
		t.Fatal(err)
	}
	return s, results
}

// lengthRun is a burst of 64 requests of 200 and 200 tokens on the mean,
// its extra fields (a length table, say) added after the workload's.
func lengthRun(id, workloadExtra, runExtra string) string {
	return `{"id": "` + id + `", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": ["--max-model-len", "4096"], "workload": {"in": 200, "out": 200, "requests": 64` + workloadExtra + `},
		 "stat": "mean", "measured": {"output_tok_s": 1000}, "regimes": ["offline"]` + runExtra + `}`
}

// TestLengthTables: Load reads a run's length table, draws its rows in
// the file's order scaled to the run's means, and refuses a malformed
// table, one whose means are too far from the run's, or a table beside a
// range ratio, cycled prompts or an unscored reason, in one line each.
func TestLengthTables(t *testing.T) {
	dir := t.TempDir()
	tables := map[string]string{
		"good.csv":  "# in,out from a source\n190,50\n210,330\n\n",
		"far.csv":   "200,50\n200,150\n",
		"bad.csv":   "200,50\n200 150\n",
		"zero.csv":  "200,0\n",
		"empty.csv": "# nothing\n",
	}
	for name, body := range tables {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ name, workload, run, want string }{
		{"good", `, "lengths": "good.csv"`, "", ""},
		{"missing", `, "lengths": "none.csv"`, "", "none.csv: no such file"},
		{"malformed", `, "lengths": "bad.csv"`, "", `bad.csv:2: "200 150": want "in,out"`},
		{"zero", `, "lengths": "zero.csv"`, "", `zero.csv:1: "200,0"`},
		{"empty", `, "lengths": "empty.csv"`, "", "empty.csv: no lengths"},
		{"far", `, "lengths": "far.csv"`, "", "mean output 100.0 is -50.0% from the workload's 200 (at most 10%"},
		{"range ratio", `, "lengths": "good.csv", "range_ratio": 0.5`, "", "takes no range_ratio or prompts"},
		{"prompts", `, "lengths": "good.csv", "prompts": 4`, "", "takes no range_ratio or prompts"},
		{"unscored", `, "lengths": "good.csv"`, `, "unscored": "means"`, "a run with a length table has its requests' lengths, and is scored"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, "runs.json")
		doc := `{"sources": {"s": {"what": "w", "url": "https://example.org", "split": "held-out"}}, "runs": [` + lengthRun("a", tt.workload, tt.run) + `]}`
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path)
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err %v, want one line with %q", tt.name, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		// Rows (190, 50) and (210, 330), means 200 and 190: inputs stay,
		// outputs scale by 200/190, in the file's order.
		reqs, _, _ := s.Runs[0].Workload.requests("a", "vllm")
		if len(reqs) != 64 || reqs[0].PromptTokens != 190 || reqs[0].MaxTokens != 53 || reqs[1].PromptTokens != 210 || reqs[1].MaxTokens != 347 || reqs[2].MaxTokens != 53 {
			t.Errorf("%s: requests %+v ...", tt.name, reqs[:3])
		}
	}
}

// TestLengthTableBurstEndsLater simulates one burst at its mean lengths
// and drawn from a table of the same means whose outputs vary: the varied
// burst ends in a tail of its longest requests, at a small batch, so it
// takes longer to move the same tokens.
func TestLengthTableBurstEndsLater(t *testing.T) {
	dir := t.TempDir()
	// Three short answers for one long one: output mean (3 x 50 + 650) / 4 = 200.
	if err := os.WriteFile(filepath.Join(dir, "tail.csv"), []byte("200,50\n200,50\n200,50\n200,650\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, results := loadSuite(t, filepath.Join(dir, "runs.json"), lengthRun("mean", "", ""), lengthRun("table", `, "lengths": "tail.csv"`, ""))
	atMean, drawn := results[0].Predicted, results[1].Predicted
	if !(drawn.Throughput < 0.8*atMean.Throughput) {
		t.Errorf("output throughput %.0f tok/s with the table's tail, %.0f at the mean: want the tail's well below", drawn.Throughput, atMean.Throughput)
	}
	t.Logf("output throughput %.0f tok/s drawn from the table, %.0f at the mean", drawn.Throughput, atMean.Throughput)
	if drawn.ITL <= 0 {
		t.Errorf("the table run's time per output token: %v", drawn.ITL)
	}
}

// TestZeroLengthDraws: a range that reaches 0 (SGLang's bench_serving
// draws output lengths from np.random.randint(int(N·r), N + 1), so N = 8
// at a small ratio draws 0..8) never sends a request without max_tokens,
// which the engine would fill to the context's end: each output asks for
// its draw, a 0 as the one token SGLang runs for max_new_tokens 0, and
// that token is left out of the count, as the client counts the draw.
func TestZeroLengthDraws(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	s, results := loadSuite(t, path, `
		{"id": "a", "source": "s", "engine": "sglang", "version": "0.2", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": [], "workload": {"in": 512, "out": 4, "range_ratio": 0.001, "requests": 100}, "stat": "mean",
		 "measured": {"output_tok_s": 100}, "regimes": ["offline"]}`)
	w := s.Runs[0].Workload
	reqs, _, uncounted := w.requests("a", "sglang")
	draw, zeros := w.lengths("a"), 0
	for _, q := range reqs {
		in, out := draw()
		if out == 0 {
			zeros++
		}
		if q.PromptTokens != max(in, 1) || q.MaxTokens != max(out, 1) || out > 8 {
			t.Fatalf("request %d: drawn %d in, %d out; sent %d, %d", q.Index, in, out, q.PromptTokens, q.MaxTokens)
		}
	}
	if zeros == 0 || uncounted != zeros {
		t.Errorf("%d zero output draws, %d tokens uncounted: want some, one each", zeros, uncounted)
	}
	// Every request ends within its prefill and 8 decode steps: a
	// 100-request burst of 512-token prompts on one H100 is over in
	// seconds, not the hours of requests decoding to the 131,072-token
	// context's end.
	if e2e := results[0].Predicted.E2E; !(e2e > 0 && e2e < 20e3) {
		t.Errorf("mean E2E %.0f ms: want under 20 s", e2e)
	}
}

// TestFullRange: range_ratio 0, SGLang's bench_serving default, draws
// over [0, N], N twice the mean (a vLLM run whose range reaches 0 is
// refused: TestLoadRejectsBadRuns).
func TestFullRange(t *testing.T) {
	w := Workload{In: 4096, Out: 4, RangeRatio: new(float64), Requests: 2000}
	reqs, _, uncounted := w.requests("full", "sglang")
	in, out := 0, 0
	for _, q := range reqs {
		in += q.PromptTokens
		out += q.MaxTokens
	}
	if mean := float64(in) / 2000; math.Abs(mean/4096-1) > 0.05 {
		t.Errorf("mean input %.0f: want 4096 (uniform over 0..8192)", mean)
	}
	if mean := float64(out-uncounted) / 2000; math.Abs(mean/4-1) > 0.05 {
		t.Errorf("mean counted output %.2f: want 4 (uniform over 0..8)", mean)
	}
	if zeros := float64(uncounted) / 2000; math.Abs(zeros*9-1) > 0.2 {
		t.Errorf("%.3f of the outputs drawn 0: want about 1/9", zeros)
	}
}

// TestFailedRequestsSayWhy: a run whose simulated requests fail says
// why in its one-line error (the first failure's message), here a
// prompt and output over the context length (1,000 + 100 > 1,024).
func TestFailedRequestsSayWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	doc := `{"sources": {"s": {"what": "w", "url": "https://example.org", "split": "held-out"}}, "runs": [
		{"id": "long", "source": "s", "engine": "vllm", "version": "1", "gpu": "H100-SXM", "model": "meta-llama/Llama-3.1-8B-Instruct",
		 "tp": 1, "flags": ["--max-model-len", "1024"], "workload": {"in": 1000, "out": 100, "requests": 4}, "stat": "mean",
		 "measured": {"output_tok_s": 100}, "regimes": ["offline"]}]}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Simulate(s.Runs[0])
	if err == nil || !strings.Contains(err.Error(), "4 of 4 simulated requests failed") || !strings.Contains(err.Error(), "maximum context length is 1024 tokens") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err %v: want the count and the first failure's message on one line", err)
	}
}

// TestTabulateBySource gathers each source's scored runs whatever their
// regimes (a speculative run too, which All leaves out), counts its fit
// and held-out runs, and leaves the unscored out; the whole table
// carries the section.
func TestTabulateBySource(t *testing.T) {
	res := func(id, src, split, unscored string, regimes []string, err map[string]float64) Result {
		return Result{Run: Run{ID: id, Source: src, Unscored: unscored}, Split: split, Regimes: regimes, Err: err}
	}
	results := []Result{
		res("a1", "a", "fit", "", []string{"moderate"}, map[string]float64{"itl": 0.10, "ttft": -0.30}),
		res("a2", "a", "held-out", "", []string{"moderate"}, map[string]float64{"itl": -0.02}),
		res("a3", "a", "held-out", "", []string{"moderate"}, map[string]float64{"itl": 0.04}),
		res("b1", "b", "held-out", "", []string{RegimeSpec}, map[string]float64{"throughput": 0.20}),
		res("b2", "b", "held-out", "no lengths", []string{"offline"}, map[string]float64{"throughput": 1.50}),
	}
	by := TabulateBySource(results)
	a, b := by["a"], by["b"]
	if a.Fit != 1 || a.HeldOut != 2 || b.Fit != 0 || b.HeldOut != 1 {
		t.Errorf("counts: a %d/%d, b %d/%d; want 1/2 and 0/1 (the unscored run counts nowhere)", a.Fit, a.HeldOut, b.Fit, b.HeldOut)
	}
	if st := a.Metrics["itl"]; st.N != 3 || math.Abs(st.Median-0.04) > 1e-12 || st.Run != "a1" {
		t.Errorf("a itl: %+v, want 3 runs, median 4%%, worst a1", st)
	}
	if st := a.Metrics["ttft"]; st.N != 1 || st.Bias != -0.30 {
		t.Errorf("a ttft: %+v", st)
	}
	if st, ok := b.Metrics["throughput"]; !ok || st.N != 1 || st.Median != 0.20 {
		t.Errorf("b throughput: %+v (the speculative run counts in its source, the unscored one does not)", st)
	}
	var md bytes.Buffer
	writeBySource(&md, results)
	for _, want := range []string{"| a | 3 (1 / 2) | 30.0% (1) | 4.0% (3) | - | - |", "| b | 1 (0 / 1) | - | - | - | 20.0% (1) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("by-source table lacks %q:\n%s", want, md.String())
		}
	}
}

// TestSiliconTable: a silicon table's rows become closed-loop runs at the
// row's concurrency, and the rows the simulator cannot run are listed with
// their reason, not dropped.
func TestSiliconTable(t *testing.T) {
	dir := t.TempDir()
	head := "id,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms,measured\n"
	rows := "a,vllm,0.12.0,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,agg,1024,1024,,,16,1,1,,1,80,9,\n" +
		"f,sglang,0.5.1.post1,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,agg,1024,128,,,8,2,1,,1,50,8,\n" +
		"b,sglang,,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,fp8,agg,512,128,fp8,fp8,4,1,1,,1,30,5,2026-01-02\n" +
		"c,vllm,0.12.0,example/unknown-model,h100_sxm,,agg,1024,128,,,4,1,1,,1,50,8,\n" +
		"d,sglang,0.5.8,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,disagg,1024,128,,,,,,,,50,8,\n" +
		"e,vllm,0.12.0,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,fp4,agg,1024,128,nvfp4,nvfp4,4,1,1,,1,50,8,\n" +
		"g,vllm,0.18.0,openai/gpt-oss-120b,h100_sxm,fp4,agg,1024,128,nvfp4,nvfp4,4,2,1,1,1,50,8,\n" +
		"m_1024x1024_c4_tp4_0_ep4_0_1,vllm,0.18.0,MiniMaxAI/MiniMax-M2.5,h100_sxm,fp8,agg,1024,1024,fp8,fp8,4,4,1,1,4,80,10,\n" +
		"m_1024x1024_c32_tp4_ep4_2,vllm,0.18.0,MiniMaxAI/MiniMax-M2.5,h100_sxm,fp8,agg,1024,1024,fp8,fp8,8,4,1,4,16,140,20,\n" +
		"n,vllm,0.18.0,MiniMaxAI/MiniMax-M2.5,h100_sxm,fp8,agg,1024,1024,fp8,fp8,8,2,1,2,4,140,20,\n" +
		"k,sglang,0.5.8,MiniMaxAI/MiniMax-M2.5,h100_sxm,fp8,agg,1024,1024,fp8,fp8,8,4,1,1,4,140,20,\n" +
		"l,vllm,0.18.0,MiniMaxAI/MiniMax-M2.5,h100_sxm,fp8,agg,1024,1024,fp8,fp8,8,4,2,1,4,140,20,\n"
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte(head+rows), 0o644); err != nil {
		t.Fatal(err)
	}
	suite := `{"sources": {"aic": {"what": "w", "repo": "r", "path": "p", "commit": "c", "split": "held-out"}}, "runs": [],
		"silicon": [{"file": "t.csv", "source": "aic", "rounds": 3}]}`
	path := filepath.Join(dir, "runs.json")
	if err := os.WriteFile(path, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Runs) != 7 {
		t.Fatalf("%d runs, want 7 (a, f, b, g, m, m, n)", len(s.Runs))
	}
	a, f, b := s.Runs[0], s.Runs[1], s.Runs[2]
	// gpt-oss's fp4 label is its MXFP4 checkpoint, served as published
	// with InferenceX's flags; MiniMax-M2.5's experts in parallel over the
	// TP group; the row whose columns count TP x EP GPUs runs as its id
	// names it; attention DP as vLLM's data-parallel ranks.
	g, ep, legacy, dp := s.Runs[3], s.Runs[4], s.Runs[5], s.Runs[6]
	if slices.Contains(g.Flags, "--quantization") || !slices.Contains(g.Flags, "--max-model-len") || g.TP != 2 {
		t.Errorf("gpt-oss row: flags %v, tp %d", g.Flags, g.TP)
	}
	if !slices.Contains(ep.Flags, "--enable-expert-parallel") || slices.Contains(ep.Flags, "--data-parallel-size") || ep.TP != 4 || ep.Workload.Concurrency != 4 {
		t.Errorf("EP row: flags %v, tp %d, concurrency %d", ep.Flags, ep.TP, ep.Workload.Concurrency)
	}
	if !slices.Contains(legacy.Flags, "--enable-expert-parallel") || slices.Contains(legacy.Flags, "--data-parallel-size") || legacy.TP != 4 ||
		legacy.Workload.Concurrency != 32 || !strings.Contains(legacy.Note, "id") {
		t.Errorf("row counted as TP x EP: flags %v, tp %d, concurrency %d, note %q", legacy.Flags, legacy.TP, legacy.Workload.Concurrency, legacy.Note)
	}
	if i := slices.Index(dp.Flags, "--data-parallel-size"); i < 0 || dp.Flags[i+1] != "2" || !slices.Contains(dp.Flags, "--enable-expert-parallel") ||
		dp.TP != 2 || dp.Workload.Concurrency != 16 {
		t.Errorf("attention-DP row: flags %v, tp %d, concurrency %d", dp.Flags, dp.TP, dp.Workload.Concurrency)
	}
	if !slices.Equal(f.VersionFlags, []string{"--mem-fraction-static", "0.87", "--cuda-graph-max-bs", "160", "--chunked-prefill-size", "8192"}) {
		t.Errorf("SGLang 0.5.1.post1 at TP2: version flags %v, want the defaults before PR #10975", f.VersionFlags)
	}
	if a.Workload.Concurrency != 16 || a.Workload.Requests != 48 || a.Measured.TTFT != 80 || a.Measured.ITL != 9 || a.Stat != "mean" {
		t.Errorf("run a: %+v", a)
	}
	if !slices.Equal(a.Regimes, []string{RegimeConcurrency, "long-context"}) || !slices.Equal(b.Regimes, []string{RegimeConcurrency}) {
		t.Errorf("regimes %v and %v, want concurrency (and long-context at 2,048 tokens)", a.Regimes, b.Regimes)
	}
	if !slices.Equal(b.Flags, []string{"--quantization", "fp8"}) || !strings.Contains(b.Version, "2026-01-02") || len(b.VersionFlags) > 0 {
		t.Errorf("run b: flags %v, version %q", b.Flags, b.Version)
	}
	want := map[string]string{"c": "not in the simulator's catalog", "d": "disaggregated", "e": "nvfp4", "k": "sglang", "l": "pipeline"}
	if len(s.Unrunnable) != len(want) {
		t.Fatalf("unrunnable %+v, want c, d, e, k, l", s.Unrunnable)
	}
	for _, u := range s.Unrunnable {
		if !strings.Contains(u.Reason, want[u.ID]) {
			t.Errorf("row %s: reason %q, want %q", u.ID, u.Reason, want[u.ID])
		}
	}
	res, err := s.Simulate(a)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Regimes, RegimeConcurrency) || res.Predicted.TTFT <= 0 || res.Predicted.ITL <= 0 {
		t.Errorf("simulated a: %+v", res)
	}
	var md strings.Builder
	WriteMarkdown(&md, s, []Result{res}, Tabulate([]Result{res}, ""))
	if !strings.Contains(md.String(), "example/unknown-model") {
		t.Error("the whole table does not list the unrunnable rows")
	}
}

// TestSiliconVLLMSchedulesAsItsReleaseDid: a vLLM row of a release before
// async scheduling became the default (v0.14.0), or an unversioned one
// measured before it was out, runs with --no-async-scheduling, unless its
// benchmark is InferenceX's, whose scripts turn it on; a row of a later
// release, or of no release and no date, keeps the engine's default.
func TestSiliconVLLMSchedulesAsItsReleaseDid(t *testing.T) {
	row := func(id, version, measured string) map[string]string {
		return map[string]string{"id": id, "backend": "vllm", "backend_version": version, "model_path": "meta-llama/Llama-3.1-8B-Instruct",
			"system": "h100_sxm", "mode": "agg", "isl": "1024", "osl": "128", "batch_size": "8", "tp_size": "1", "pp_size": "1",
			"silicon_ttft_ms": "80", "silicon_tpot_ms": "9", "measured": measured}
	}
	off := []string{"--no-async-scheduling"}
	for _, c := range []struct {
		id, version, measured string
		want                  []string
	}{
		{"qwen_a_1024x128_c8_tp1", "0.12.0", "", off},
		{"qwen_b_1024x128_c8_tp1", "0.13.0", "2026-01-10", off},
		{"qwen_c_1024x128_c8_tp1", "0.14.0", "", nil},
		{"qwen_d_1024x128_c8_tp1", "0.18.0", "2026-03-27", nil},
		{"qwen_e_1024x128_c8_tp1", "", "2025-12-05", off},
		{"qwen_f_1024x128_c8_tp1", "", "2026-02-01", nil},
		{"qwen_g_1024x128_c8_tp1", "", "", nil},
		{"2025_12_08_llama_1024x128_c8_tp1", "0.11.2", "2025-12-08", nil},
		{"2025_10_29_llama_1024x128_c8_tp1", "", "2025-10-29", nil},
	} {
		r, why := siliconRun(row(c.id, c.version, c.measured), SiliconTable{Source: "aic", Rounds: 1})
		if why != "" {
			t.Fatalf("%s: %s", c.id, why)
		}
		if !slices.Equal(r.VersionFlags, c.want) {
			t.Errorf("%s (vLLM %q, measured %q): version flags %v, want %v", c.id, c.version, c.measured, r.VersionFlags, c.want)
		}
	}
}
