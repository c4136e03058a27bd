package spec_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/yamlpos"
)

// traceDataset is goodSpec's dataset line as a trace (line 14).
const traceDataset = "dataset:\n    kind: trace\n    path: traces/mooncake.jsonl\n    format: mooncake\n    speed: 2\n    start: 30s\n    duration: 10m"

// A trace dataset: its keys, its path against the spec file's directory,
// and requests_per_level the whole window unless given.
func TestParseSpecTrace(t *testing.T) {
	src := strings.Replace(goodSpec, "dataset: {kind: random, input: 512, output: {uniform: [32, 64]}}", traceDataset, 1)
	src = strings.Replace(src, "  requests_per_level: 20\n", "", 1)
	study, err := parseSpec([]byte(src), filepath.Join("studies", "s1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := study.Workload.Dataset
	want := bench.Trace{Format: "mooncake", Speed: 2, Start: 30 * time.Second, Duration: 10 * time.Minute}
	if d.Kind != bench.DatasetTrace || d.Trace == nil || *d.Trace != want {
		t.Fatalf("dataset %+v, trace %+v", d, d.Trace)
	}
	if d.Path != filepath.Join("studies", "traces", "mooncake.jsonl") {
		t.Errorf("path %q: want it against the spec's directory", d.Path)
	}
	if study.Workload.RequestsPerLevel != 0 {
		t.Errorf("requests per level %d: want 0 (the window)", study.Workload.RequestsPerLevel)
	}
	abs := strings.Replace(src, "path: traces/mooncake.jsonl", "path: /data/m.jsonl", 1)
	if study, err := parseSpec([]byte(abs), "studies/s1.yaml"); err != nil || study.Workload.Dataset.Path != "/data/m.jsonl" {
		t.Errorf("an absolute path: %v, %q", err, study.Workload.Dataset.Path)
	}
}

// A bad trace field is one line naming the file, the line and the field.
func TestParseSpecTraceBad(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		line           int
		field, msg     string
	}{
		{"unknown format", "format: mooncake", "format: parquet", 17, "workload.dataset.format", `unknown trace format "parquet"`},
		{"no format", "    format: mooncake\n", "", 15, "workload.dataset.format", "missing"},
		{"no path", "    path: traces/mooncake.jsonl\n", "", 15, "workload.dataset.path", "missing"},
		{"zero speed", "speed: 2", "speed: 0", 18, "workload.dataset.speed", "must be > 0"},
		{"negative start", "start: 30s", "start: -5s", 19, "workload.dataset.start", "duration >= 0"},
		{"bad duration", "duration: 10m", "duration: long", 20, "workload.dataset.duration", "duration"},
		{"format without trace", "kind: trace", "kind: random\n    input: 8\n    output: 8", 19, "workload.dataset.format", "only with kind: trace"},
		{"rate load", "load: {concurrency: [1, 8]}", "load: {rate: [2]}", 21, "workload.load", "its own time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodSpec, "dataset: {kind: random, input: 512, output: {uniform: [32, 64]}}", traceDataset, 1)
			bad := strings.Replace(src, tc.old, tc.new, 1)
			if bad == src {
				t.Fatalf("replacement %q not applied", tc.old)
			}
			_, err := parseSpec([]byte(bad), "t.yaml")
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *yamlpos.Error", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || se.Line != tc.line || se.Field != tc.field || !strings.Contains(msg, tc.msg) {
				t.Errorf("%q: want t.yaml:%d: %s: ...%s", msg, tc.line, tc.field, tc.msg)
			}
		})
	}
}
