package spec_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
)

// A dataset file named in a spec is found beside the spec, wherever the
// study is started: sharegpt, jsonl (here in a mix) and a ShareGPT
// conversation file, relative to the spec file's directory; an absolute
// path stays as written.
func TestDatasetPathsAgainstSpecDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	sharegpt := `[{"id": "a", "conversations": [{"from": "human", "value": "Name three rivers in Europe please."}, {"from": "gpt", "value": "The Danube, the Rhine and the Loire."}]}]`
	for name, body := range map[string]string{
		"sg.json":       sharegpt,
		"prompts.jsonl": `{"prompt": "Summarise the plot of Hamlet in one line.", "output_len": 12}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "data", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := "dataset: {kind: random, input: 512, output: {uniform: [32, 64]}}"
	for name, tc := range map[string]struct {
		dataset string
		paths   func(bench.DatasetSpec) []string
	}{
		"sharegpt": {"dataset: {kind: sharegpt, path: data/sg.json}",
			func(d bench.DatasetSpec) []string { return []string{d.Path} }},
		"mix": {"dataset: {kind: mix, mix: [{weight: 1, spec: {kind: jsonl, path: data/prompts.jsonl, output: 16}}, {weight: 1, spec: {kind: sharegpt, path: ./data/sg.json}}]}",
			func(d bench.DatasetSpec) []string { return []string{d.Mix[0].Spec.Path, d.Mix[1].Spec.Path} }},
		"conversation": {"dataset: {kind: conversation, path: data/sg.json, sessions: 1, think_time: 1s}",
			func(d bench.DatasetSpec) []string { return []string{d.Path} }},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, name+".yaml")
			src := strings.Replace(goodSpec, old, tc.dataset, 1)
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			study, err := parseSpecFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d := study.Workload.Dataset
			for _, p := range tc.paths(d) {
				if filepath.Dir(p) != filepath.Join(dir, "data") {
					t.Errorf("path %q: want it in %s", p, filepath.Join(dir, "data"))
				}
			}
			if d.Kind == bench.DatasetConversation {
				if d.Sessions != 1 || d.Turns != nil {
					t.Errorf("conversation %+v", d)
				}
				return
			}
			// The test runs in the package's directory: the file is read
			// from the spec's.
			if reqs, err := d.Generate(rand.New(rand.NewPCG(1, 2)), 4); err != nil || len(reqs) != 4 {
				t.Errorf("generate: %v, %d requests", err, len(reqs))
			}
			abs := strings.Replace(src, "path: data/", "path: "+filepath.Join(dir, "data")+"/", 1)
			if study, err := parseSpec([]byte(abs), "elsewhere/s.yaml"); err != nil || !strings.HasPrefix(tc.paths(study.Workload.Dataset)[0], dir) {
				t.Errorf("an absolute path: %v", err)
			}
		})
	}
	// turns with a file: refused, naming the field.
	src := strings.Replace(goodSpec, old, "dataset: {kind: conversation, path: data/sg.json, sessions: 1, turns: 3}", 1)
	if _, err := parseSpec([]byte(src), filepath.Join(dir, "t.yaml")); err == nil || !strings.Contains(err.Error(), "workload.dataset.turns") {
		t.Errorf("turns with a file: %v", err)
	}
}
