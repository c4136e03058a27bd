package spec_test

import (
	"github.com/servetune/servetune/internal/testspec"

	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	_ "github.com/servetune/servetune/launcher/kinds" // the launcher kinds of the specs these tests parse
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

// goodSpec is a study on the simulated engine, measured on the real clock.
var goodSpec = testspec.Sim

func TestParseSpecGood(t *testing.T) {
	study, l, err := tuner.ParseSpec([]byte(goodSpec), "s1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if study.Name != "s1" || study.Engine != engine.VLLM || study.Launcher.Kind != "sim" {
		t.Errorf("spec = %+v", study)
	}
	if study.Launcher.ReadyTimeout != 30*time.Second || l.Capabilities().TimeScale != 50 || len(study.Launcher.GPUs) != 2 {
		t.Errorf("launcher = %+v", study.Launcher)
	}
	if len(study.Space.Params) != 2 || len(study.Workload.Levels) != 2 || study.Workload.Levels[1].MaxConcurrency != 8 {
		t.Errorf("space/workload = %+v / %+v", study.Space, study.Workload)
	}
	if study.Workload.Dataset.Input.Value != 512 || study.Workload.Dataset.Output.Max != 64 {
		t.Errorf("dataset = %+v", study.Workload.Dataset)
	}
	if len(study.SLO) != 2 || study.SLO.Goodput().TTFTms != 500 {
		t.Errorf("slo = %v", study.SLO)
	}
	if study.Tuner.Sampler != spec.SamplerRandom || study.Tuner.Trials != 5 || study.Tuner.Seed != 7 || study.Tuner.Objective.Metric != "goodput_per_gpu" {
		t.Errorf("tuner = %+v", study.Tuner)
	}
	if study.Text != goodSpec {
		t.Error("spec text not kept")
	}
}

func TestParseSpecExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := parseSpecFile(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseSpecBad(t *testing.T) {
	tests := []struct {
		name      string
		old, new  string
		wantLine  int
		wantField string
		wantMsg   string
	}{
		{"unknown top key", "engine: vllm", "engine: vllm\ncolor: red", 4, "color", "unknown key"},
		{"bad engine", "engine: vllm", "engine: trtllm", 3, "engine", "want vllm or sglang"},
		{"unknown launcher kind", "kind: sim", "kind: k8s", 5, "launcher.kind", "want docker"},
		{"image on sim", "kind: sim", "kind: sim\n  image: x", 6, "launcher.image", "only for launcher kind docker"},
		{"bad duration", "ready_timeout: 30s", "ready_timeout: soon", 7, "launcher.ready_timeout", "duration"},
		{"bad space", "tensor_parallel: [1, 2]", "tensor_paralel: [1, 2]", 11, "space", "unknown setting"},
		{"bad load", "load: {concurrency: [1, 8]}", "load: {concurrency: [1, 8], rate: [2]}", 15, "workload.load", "exactly one"},
		{"bad dist", "input: 512", "input: {uniform: [5]}", 14, "workload.dataset.input.uniform", "[MIN, MAX]"},
		{"bad slo", "tpot_p99_ms: 50", "tpot_p42_ms: 50", 18, "slo.tpot_p42_ms", "unknown limit"},
		{"bad error rate", "tpot_p99_ms: 50", "tpot_p99_ms: 50, error_rate: 1.5", 18, "slo.error_rate", "below 1"},
		{"bad objective", "min ttft_p99]", "min speed]", 19, "objectives", "unknown metric"},
		{"bad sampler", "sampler: random", "sampler: bayes", 20, "tuner.sampler", "want guided, tpe"},
		{"too few GPUs", "tensor_parallel: [1, 2]", "tensor_parallel: [4]", 6, "launcher.gpus", "needs 4 GPUs"},
		{"dup GPU", "gpus: [0, 1]", "gpus: [0, 0]", 6, "launcher.gpus", "twice"},
		{"secret in env", "time_scale: 50", "time_scale: 50\n  env: [HF_TOKEN=abc]", 9, "launcher.env", "names only"},
		{"missing model", "model: meta-llama/Llama-3.1-8B-Instruct\n", "", 1, "model", "missing"},
		{"yaml syntax", "engine: vllm", "engine: [vllm", 0, "", "invalid YAML"},
		{"cmaes one numeric", "sampler: random", "sampler: cmaes", 20, "tuner.sampler", "at least 2 numeric"},
		{"absurd start rate", "load: {concurrency: [1, 8]}", "load: {capacity: rate, start_rate: 1e9, max_rate: 1e12}", 15, "workload.load.start_rate", "above 10000 req/s"},
		{"absurd max rate", "load: {concurrency: [1, 8]}", "load: {capacity: rate, max_rate: 1e12}", 15, "workload.load.max_rate", "above 10000 req/s"},
		{"absurd rate level", "load: {concurrency: [1, 8]}", "load: {rate: [2, 1e6]}", 15, "workload.load.rate", "above 10000 req/s"},
		{"absurd time scale", "time_scale: 50", "time_scale: 1e308", 8, "launcher.time_scale", "1e308 is above the maximum 1000"},
		{"time scale 1e30", "time_scale: 50", "time_scale: 1e30", 8, "launcher.time_scale", "above the maximum 1000"},
		{"absurd price", "price_per_gpu_hour: 2.5", "price_per_gpu_hour: 1e300", 9, "hardware.price_per_gpu_hour", "above the maximum 1e+09"},
		{"absurd slo", "tpot_p99_ms: 50", "tpot_p99_ms: 1e300", 18, "slo.tpot_p99_ms", "above the maximum 1e+09"},
		{"long name", "name: s1", "name: " + strings.Repeat("n", 5000), 1, "name", "(5000 characters): use 1 to 128"},
		{"empty model", "model: meta-llama/Llama-3.1-8B-Instruct", `model: ""`, 2, "model", "empty: give a Hugging Face id"},
		{"endless bisection", "load: {concurrency: [1, 8]}", "load: {capacity: rate, rate_precision: 1e-300}", 15, "workload.load.rate_precision", "want 0.001 to 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodSpec, tc.old, tc.new, 1)
			if src == goodSpec {
				t.Fatalf("replacement %q not applied", tc.old)
			}
			_, err := parseSpec([]byte(src), "bad.yaml")
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want *yamlpos.Error", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "bad.yaml:") {
				t.Errorf("message %q is not one line naming the file", msg)
			}
			if tc.wantLine > 0 && se.Line != tc.wantLine {
				t.Errorf("line %d, want %d (%v)", se.Line, tc.wantLine, err)
			}
			if se.Field != tc.wantField {
				t.Errorf("field %q, want %q (%v)", se.Field, tc.wantField, err)
			}
			if !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("message %q lacks %q", msg, tc.wantMsg)
			}
		})
	}
}

// parseSpec parses a spec as a study does (tuner.ParseSpec): the spec,
// then its launcher section by the launcher's kind and the checks that
// need the launcher, so that their errors are seen too.
func parseSpec(data []byte, file string) (*spec.Spec, error) {
	study, _, err := tuner.ParseSpec(data, file)
	return study, err
}

// parseSpecFile is parseSpec of a file.
func parseSpecFile(path string) (*spec.Spec, error) {
	study, _, err := tuner.ParseSpecFile(path)
	return study, err
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte(dockerHostsSpec))
	f.Add([]byte("name: x\n"))
	f.Add([]byte("space: {tensor_parallel: [1, 2]}\nworkload: {load: {capacity: true}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		study, err := spec.ParseSpec(data, "f.yaml")
		if err != nil {
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *yamlpos.Error", err)
			}
			return
		}
		if study.Name == "" || study.Model == "" || study.Tuner.Trials < 1 {
			t.Fatalf("accepted an incomplete spec: %+v", study)
		}
	})
}

func TestParseSpecEndpoint(t *testing.T) {
	src := strings.NewReplacer(
		"kind: sim\n  gpus: [0, 1]\n  ready_timeout: 30s\n  time_scale: 50", "kind: endpoint\n  base_url: http://127.0.0.1:8000",
		"tensor_parallel: [1, 2]", "tensor_parallel: 1",
		"max_running_requests: {int: [16, 256], log: true}", "max_running_requests: 256",
	).Replace(goodSpec)
	if _, err := parseSpec([]byte(src), "ep.yaml"); err != nil {
		t.Fatalf("fixed settings with an endpoint: %v", err)
	}
	bad := strings.Replace(src, "tensor_parallel: 1", "tensor_parallel: [1, 2]", 1)
	if _, err := parseSpec([]byte(bad), "ep.yaml"); err == nil || !strings.Contains(err.Error(), "ep.yaml:9: space.tensor_parallel: the endpoint launcher") {
		t.Fatalf("searched setting with an endpoint: %v", err)
	}
}

// dockerHostsSpec is goodSpec on two Docker hosts.
var dockerHostsSpec = strings.Replace(goodSpec, "kind: sim\n  gpus: [0, 1]\n", `kind: docker
  image: servetune-sim:dev
  hosts:
    - {docker_host: "ssh://me@gpu-a:2222", address: 10.0.0.7, gpus: [0, 1]}
    - {docker_host: "unix:///var/run/docker.sock", gpus: [3]}
`, 1)

func TestParseSpecDockerHosts(t *testing.T) {
	study, l, err := tuner.ParseSpec([]byte(dockerHostsSpec), "h.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := l.Capabilities()
	if !slices.Equal(c.GPUs, []int{0, 1, 103}) || c.HostOf(103) != 1 || c.HostOf(1) != 0 {
		t.Fatalf("GPUs %v, HostOf(103) = %d", c.GPUs, c.HostOf(103))
	}
	if c.LocalGPUs {
		t.Error("GPUs of remote hosts read as local")
	}
	if p := study.Parallelism(); p != 3 {
		t.Errorf("Parallelism = %d, want 3 (TP1 on each of 3 GPUs)", p)
	}

	bad := []struct{ name, old, new, want string }{
		{"docker_host on sim", "kind: sim\n", "kind: sim\n  docker_host: unix:///x\n", "launcher.docker_host: only for launcher kind docker"},
		{"remote without address", "kind: sim\n", "kind: docker\n  image: servetune-sim:dev\n  docker_host: ssh://gpu-a\n", "launcher.address: missing for the remote Docker host ssh://gpu-a"},
		{"bad scheme", "kind: sim\n", "kind: docker\n  image: servetune-sim:dev\n  docker_host: http://gpu-a\n", "want unix://, tcp:// or ssh://"},
		{"password", "kind: sim\n", "kind: docker\n  image: servetune-sim:dev\n  docker_host: ssh://me:pw@gpu-a\n  address: gpu-a\n", "passwords in docker_host"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSpec([]byte(strings.Replace(goodSpec, tc.old, tc.new, 1)), "bad.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	hostsBad := []struct{ name, old, new, want string }{
		{"gpus beside hosts", "  hosts:\n", "  gpus: [0]\n  hosts:\n", "launcher.gpus: give it per host"},
		{"host without gpus", ", gpus: [3]}", "}", "launcher.hosts[1].gpus: missing"},
		{"remote host without address", "address: 10.0.0.7, ", "", "launcher.hosts[0].address: missing"},
		{"GPU number too high", "gpus: [3]", "gpus: [100]", "at most 100 GPUs per host"},
		{"TP larger than any host", "tensor_parallel: [1, 2]", "tensor_parallel: [3]", "the largest host lists 2"},
	}
	for _, tc := range hostsBad {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(dockerHostsSpec, tc.old, tc.new, 1)
			if src == dockerHostsSpec {
				t.Fatalf("replacement %q not applied", tc.old)
			}
			if _, err := parseSpec([]byte(src), "bad.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A cost objective takes the catalog's dated price of hardware.gpu when the
// spec gives none, and is rejected when there is neither.
func TestSpecCostPrice(t *testing.T) {
	cost := strings.Replace(goodSpec, "objectives: [max output_throughput_per_gpu, min ttft_p99]", "objectives: [max output_throughput_per_gpu, min cost_per_mtok]", 1)
	study, err := parseSpec([]byte(strings.Replace(cost, ", price_per_gpu_hour: 2.5", "", 1)), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := catalog.LookupGPU("H100-SXM"); study.Hardware.PricePerGPUHour != g.Price.PerGPUHour || g.Price.PerGPUHour <= 0 {
		t.Errorf("price = %v, want the catalog's %v", study.Hardware.PricePerGPUHour, g.Price.PerGPUHour)
	}
	if study, _ := parseSpec([]byte(cost), "c.yaml"); study.Hardware.PricePerGPUHour != 2.5 {
		t.Errorf("the spec's own price lost: %v", study.Hardware.PricePerGPUHour)
	}
	_, err = parseSpec([]byte(strings.Replace(cost, "hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.5}\n", "", 1)), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "cost_per_mtok needs hardware.price_per_gpu_hour") {
		t.Errorf("no price, no GPU: %v", err)
	}
}
