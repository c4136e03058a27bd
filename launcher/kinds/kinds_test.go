package kinds_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	_ "github.com/servetune/servetune/launcher/kinds"
)

// TestKindCapabilities lists what every kind's launcher can do beside
// Launch (launcher.Capabilities), from the launcher section a spec gives
// it: the one table a reader looks at. Every registered kind has a row.
func TestKindCapabilities(t *testing.T) {
	cases := []struct {
		kind, section, want string
	}{
		{"process", "command: [vllm, serve, '{model}', --port, '{port}']", "Reap LocalGPUs"},
		{"endpoint", "base_url: http://10.0.0.5:8000", "Preflight FixedSettings"},
		{"sim", "time_scale: 50", "Reap TimeScale=50 Preflight"},
		{"virtual", "", "Preflight Deterministic Disaggregates"},
		{"docker", "image: vllm/vllm-openai:v0.11.0\ngpus: [0, 1]", "GPUs=[0 1] HostOf Reap LocalGPUs TimeScale=1 Preflight"},
		{"docker", "image: servetune-sim:dev\ntime_scale: 5\nhosts:\n  - {docker_host: \"ssh://me@gpu-a\", address: 10.0.0.7, gpus: [0, 1]}\n  - {docker_host: \"tcp://gpu-b:2375\", address: 10.0.0.8, gpus: [3]}",
			"GPUs=[0 1 103] HostOf Reap TimeScale=5 Preflight"},
		{"slurm", "partition: gpu", "Reap TimeScale=1 Preflight"},
		{"kubernetes", "namespace: llm\nimage: vllm/vllm-openai:v0.11.0", "Reap TimeScale=1 Preflight"},
		{"kubernetes", "image: servetune-sim:dev\ngpus: [0, 1, 2, 3]\ntime_scale: 5\naccess: pod-ip", "GPUs=[0 1 2 3] Reap TimeScale=5 Preflight"},
		{"slurm", "simulated: true\ntime_scale: 20", "Reap TimeScale=20 Preflight"},
	}
	listed := map[string]bool{}
	for _, c := range cases {
		listed[c.kind] = true
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte("kind: "+c.kind+"\n"+c.section), &doc); err != nil {
			t.Fatal(err)
		}
		d := &yamlpos.Decoder{File: "l.yaml"}
		l, _ := launcher.Decode(d, doc.Content[0], launcher.Common{
			Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-SXM", Study: "s"})
		if err := d.Err(); err != nil || l == nil {
			t.Errorf("%s: %v", c.kind, err)
			continue
		}
		if got := describe(l.Capabilities()); got != c.want {
			t.Errorf("%s (%q): capabilities %q, want %q", c.kind, c.section, got, c.want)
		}
	}
	for _, k := range launcher.Kinds() {
		if !listed[k.Name] {
			t.Errorf("kind %s has no row: list its capabilities here", k.Name)
		}
	}
}

// describe names the capabilities c holds, in field order: a function or a
// true flag by its field's name, a value as name=value. A field added to
// launcher.Capabilities shows here without a change.
func describe(c launcher.Capabilities) string {
	var out []string
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.IsZero():
		case f.Kind() == reflect.Func || f.Kind() == reflect.Bool:
			out = append(out, name)
		default:
			out = append(out, fmt.Sprintf("%s=%v", name, f.Interface()))
		}
	}
	return strings.Join(out, " ")
}

// TestRequiredKeys: a section without a kind's Required key fails with
// the key's position and "missing", naming the kind, before the kind's
// Decode reads anything; the required keys are the ones a kind cannot
// launch without.
func TestRequiredKeys(t *testing.T) {
	want := map[string]bool{"process.command": true, "endpoint.base_url": true, "docker.image": true}
	for _, k := range launcher.Kinds() {
		for _, key := range k.Keys {
			if !key.Required {
				continue
			}
			if !want[k.Name+"."+key.Name] {
				t.Errorf("%s.%s is required: add it to this test and to docs/spec.md", k.Name, key.Name)
			}
			delete(want, k.Name+"."+key.Name)
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte("kind: "+k.Name+"\ngpus: [0]\n"), &doc); err != nil {
				t.Fatal(err)
			}
			d := &yamlpos.Decoder{File: "l.yaml"}
			l, _ := launcher.Decode(d, doc.Content[0], launcher.Common{
				Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-SXM", Study: "s"})
			wantErr := "l.yaml:1: launcher." + key.Name + ": missing (the " + k.Name + " launcher needs " + key.Name + ")"
			if err := d.Err(); l != nil || err == nil || err.Error() != wantErr {
				t.Errorf("%s without %s: launcher %v, err %v, want %q", k.Name, key.Name, l, err, wantErr)
			}
		}
	}
	for k := range want {
		t.Errorf("%s is not Required", k)
	}
}
