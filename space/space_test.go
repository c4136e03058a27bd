package space

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"gopkg.in/yaml.v3"
)

// parseYAML parses src as a space, the way a study spec's `space:` value arrives.
func parseYAML(t testing.TB, src string) (Space, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return Parse(&doc, "study.yaml")
}

func TestParseGood(t *testing.T) {
	src := `tensor_parallel: [1, 2, 4]
max_running_requests: {int: [16, 1024], log: true}
max_batched_tokens: [2048, 4096]
gpu_memory_fraction: {float: [0.80, 0.95]}
block_size: {int: [16, 64], step: 16}
quantization: [none, fp8]
prefix_caching: {bool: true}
cuda_graphs: [true, false]
kv_cache_dtype: fp8
extra_args: ["--disable-log-requests"]
constraints: ["max_batched_tokens >= max_running_requests"]
`
	space, err := parseYAML(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{Name: "tensor_parallel", Kind: KindCategorical, Choices: []any{1, 2, 4}, Line: 1},
		{Name: "max_running_requests", Kind: KindInt, Low: 16, High: 1024, Log: true, Line: 2},
		{Name: "max_batched_tokens", Kind: KindCategorical, Choices: []any{2048, 4096}, Line: 3},
		{Name: "gpu_memory_fraction", Kind: KindFloat, Low: 0.8, High: 0.95, Line: 4},
		{Name: "block_size", Kind: KindInt, Low: 16, High: 64, Step: 16, Line: 5},
		{Name: "quantization", Kind: KindCategorical, Choices: []any{"none", "fp8"}, Line: 6},
		{Name: "prefix_caching", Kind: KindBool, Choices: []any{false, true}, Line: 7},
		{Name: "cuda_graphs", Kind: KindBool, Choices: []any{false, true}, Line: 8},
		{Name: "kv_cache_dtype", Kind: KindCategorical, Choices: []any{"fp8"}, Line: 9},
	}
	if !reflect.DeepEqual(space.Params, want) {
		t.Errorf("params:\n got %+v\nwant %+v", space.Params, want)
	}
	if !reflect.DeepEqual(space.Extra, []string{"--disable-log-requests"}) {
		t.Errorf("extra = %q", space.Extra)
	}
	if len(space.Constraints) != 1 || space.Constraints[0].Expr != "max_batched_tokens >= max_running_requests" {
		t.Errorf("constraints = %v", space.Constraints)
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // the whole error text
	}{
		{"unknown name", "tensor_paralel: [1, 2]", "study.yaml:1: space: unknown setting \"tensor_paralel\" (did you mean tensor_parallel?)"},
		{"unknown far name", "temperature: [1]", "study.yaml:1: space: unknown setting \"temperature\""},
		{"not a mapping", "[1, 2]", "study.yaml:1: space: must be a mapping of setting names to values"},
		{"empty list", "tensor_parallel: []", "study.yaml:1: space.tensor_parallel: empty list"},
		{"tp zero", "quantization: [none]\ntensor_parallel: [1, 0]", "study.yaml:2: space.tensor_parallel: bad value: tensor_parallel 0 is outside [1, inf)"},
		{"fraction above one", "gpu_memory_fraction: {float: [0.5, 1.2]}", "study.yaml:1: space.gpu_memory_fraction: bad value: gpu_memory_fraction 1.2 is outside (0, 1]"},
		{"fraction zero", "gpu_memory_fraction: [0]", "study.yaml:1: space.gpu_memory_fraction: bad value: gpu_memory_fraction 0 is outside (0, 1]"},
		{"bad quantization", "quantization:\n  - none\n  - fp7", "study.yaml:3: space.quantization: bad value: quantization \"fp7\" is not one of [none fp8 awq awq_marlin gptq gptq_marlin int4 int8 bitsandbytes compressed-tensors marlin modelopt mxfp4 modelopt_fp4]"},
		{"string for int", "max_running_requests: [a]", "study.yaml:1: space.max_running_requests: bad value: max_running_requests must be an integer, not \"a\""},
		{"float for int", "max_running_requests: [1.5]", "study.yaml:1: space.max_running_requests: bad value: max_running_requests must be an integer, not 1.5"},
		{"reversed range", "max_running_requests: {int: [64, 16]}", "study.yaml:1: space.max_running_requests: low 64 is above high 16"},
		{"float range on int", "max_running_requests: {float: [1, 2]}", "study.yaml:1: space.max_running_requests: max_running_requests is an integer: use int: [lo, hi]"},
		{"int range on float", "gpu_memory_fraction: {int: [0, 1]}", "study.yaml:1: space.gpu_memory_fraction: gpu_memory_fraction takes a number, not an int range"},
		{"bool on int", "block_size: {bool: true}", "study.yaml:1: space.block_size: block_size takes an integer, not a bool"},
		{"bool false", "prefix_caching: {bool: false}", "study.yaml:1: space.prefix_caching: bool: must be true (searches false and true); write prefix_caching: false to fix a value"},
		{"range needs two", "block_size: {int: [16]}", "study.yaml:1: space.block_size: int: needs [lo, hi]"},
		{"unknown range key", "block_size: {int: [16, 32], by: 2}", "study.yaml:1: space.block_size: unknown key \"by\" (want int, float, bool, log or step)"},
		{"log with step", "block_size: {int: [16, 32], log: true, step: 2}", "study.yaml:1: space.block_size: step and log do not combine"},
		{"fractional int step", "block_size: {int: [16, 32], step: 1.5}", "study.yaml:1: space.block_size: step: must be an integer for an int range"},
		{"duplicate value", "tensor_parallel: [1, 2, 1]", "study.yaml:1: space.tensor_parallel: 1 listed twice"},
		{"duplicate key", "tensor_parallel: [1]\ntensor_parallel: [2]", "study.yaml:2: space.tensor_parallel: given twice"},
		{"extra args not strings", "extra_args: [--x, 3]", "study.yaml:1: space.extra_args: must be a list of strings"},
		{"constraint syntax", "tensor_parallel: [1]\nconstraints:\n  - tensor_parallel <=", "study.yaml:3: space.constraints: bad constraint: expression ends too early"},
		{"constraint on fixed-out name", "tensor_parallel: [1]\nconstraints: [\"block_size > 8\"]", "study.yaml:2: space.constraints: \"block_size\" is not a parameter of this space"},
		{"nested list", "tensor_parallel: [[1]]", "study.yaml:1: space.tensor_parallel: must be a single value"},
		{"null", "tensor_parallel: ~", "study.yaml:1: space.tensor_parallel: has no value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseYAML(t, tt.src)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var se *yamlpos.Error
			if !errors.As(err, &se) || se.Line == 0 {
				t.Errorf("not a *yamlpos.Error with a line: %#v", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	space, err := parseYAML(t, `tensor_parallel: [1, 2, 3, 8]
max_running_requests: [64, 512]
max_batched_tokens: [256, 2048]
quantization: [none, fp8]
constraints:
  - max_batched_tokens >= max_running_requests
  - quantization != "fp8" || tensor_parallel == 1
`)
	if err == nil {
		t.Fatal("|| is not in the grammar; want an error")
	}
	space, err = parseYAML(t, `tensor_parallel: [1, 2, 3, 8]
pipeline_parallel: [1, 2]
max_running_requests: [64, 512]
max_batched_tokens: [256, 2048]
quantization: [none, fp8]
constraints:
  - max_batched_tokens >= max_running_requests
  - tensor_parallel * pipeline_parallel <= 8
`)
	if err != nil {
		t.Fatal(err)
	}
	errOOM := errors.New("needs 90 GiB")
	ctx := Context{AttentionHeads: 32, KVHeads: 8, GPUs: 8, Fits: func(s Settings) error {
		if q, _ := s.String("quantization"); q == "none" {
			if tp, _ := s.Int("tensor_parallel"); tp == 1 {
				return errOOM
			}
		}
		return nil
	}}
	base := Settings{"tensor_parallel": 2, "pipeline_parallel": 1, "max_running_requests": 64, "max_batched_tokens": 2048, "quantization": "fp8"}
	with := func(k string, v any) Settings { s := base.Clone(); s[k] = v; return s }
	with2 := func(k string, v any, k2 string, v2 any) Settings { s := with(k, v); s[k2] = v2; return s }
	tests := []struct {
		name string
		s    Settings
		ctx  Context
		want string // "" = feasible
	}{
		{"feasible", base, ctx, ""},
		{"tp does not divide heads", with("tensor_parallel", 3), ctx, "infeasible settings: tensor_parallel 3 does not divide the model's 32 attention heads"},
		{"tp vs kv heads", with("tensor_parallel", 16), Context{AttentionHeads: 32, KVHeads: 12}, "infeasible settings: tensor_parallel 16 neither divides nor is a multiple of the model's 12 KV heads"},
		{"tp multiple of kv heads", with("tensor_parallel", 8), Context{AttentionHeads: 32, KVHeads: 4}, ""},
		{"too many gpus", with("pipeline_parallel", 2), Context{GPUs: 2}, "infeasible settings: tensor×pipeline×data parallel = 2×2×1 needs 4 GPUs, 2 available"},
		{"user constraint", with("max_batched_tokens", 32), ctx, `infeasible settings: constraint "max_batched_tokens >= max_running_requests" does not hold`},
		{"memory", with("tensor_parallel", 1), Context{Fits: ctx.Fits}, "infeasible settings: tensor_parallel 1 ..."},
		{"vllm without chunked prefill", with2("chunked_prefill", false, "max_model_len", 16000), Context{Engine: engine.VLLM},
			"infeasible settings: without chunked prefill vLLM needs max_batched_tokens 2048 >= max_model_len 16000"},
		{"vllm with chunked prefill", with2("chunked_prefill", true, "max_model_len", 16000), Context{Engine: engine.VLLM}, ""},
		{"sglang without chunked prefill", with2("chunked_prefill", false, "max_model_len", 16000), Context{Engine: engine.SGLang}, ""},
		{"bad value", with("quantization", "fp7"), ctx, "infeasible settings: bad value: quantization \"fp7\" is not one of [none fp8 awq awq_marlin gptq gptq_marlin int4 int8 bitsandbytes compressed-tensors marlin modelopt mxfp4 modelopt_fp4]"},
		{"unknown setting", with("max_num_seqs", 3), ctx, "infeasible settings: unknown setting \"max_num_seqs\" (did you mean max_running_requests? --max-num-seqs is vLLM's flag)"},
		{"missing setting in constraint", Settings{"tensor_parallel": 1, "pipeline_parallel": 1}, Context{}, "infeasible settings: \"max_batched_tokens >= max_running_requests\": bad constraint: max_batched_tokens is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "memory" {
				s := with("tensor_parallel", 1)
				s["quantization"] = "none"
				err := space.Check(s, tt.ctx)
				if !errors.Is(err, ErrInfeasible) || !errors.Is(err, errOOM) {
					t.Errorf("got %v, want ErrInfeasible wrapping the Fits error", err)
				}
				return
			}
			err := space.Check(tt.s, tt.ctx)
			if tt.want == "" {
				if err != nil {
					t.Errorf("got %v, want feasible", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInfeasible) {
				t.Errorf("\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestConstraint(t *testing.T) {
	s := Settings{"tensor_parallel": 2, "pipeline_parallel": 2, "max_batched_tokens": 4096.0,
		"max_running_requests": 256, "quantization": "fp8", "prefix_caching": true}
	tests := []struct {
		expr string
		want bool
		err  bool
	}{
		{"max_batched_tokens >= max_running_requests", true, false},
		{"max_batched_tokens < max_running_requests", false, false},
		{"tensor_parallel * pipeline_parallel <= 4", true, false},
		{"tensor_parallel * pipeline_parallel > 4", false, false},
		{"(tensor_parallel + 2) / 2 == 2", true, false},
		{"max_batched_tokens - 4096 == 0", true, false},
		{`quantization == "fp8"`, true, false},
		{`quantization != 'fp8'`, false, false},
		{"prefix_caching == true", true, false},
		{"prefix_caching != false", true, false},
		{"quantization >= 1", false, true},
		{`quantization < "z"`, false, true},
		{"tensor_parallel / 0 > 1", false, true},
		{"block_size > 1", false, true},
		{"1.5e3 < max_batched_tokens", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			c, err := ParseConstraint(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Holds(s)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseConstraintErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "bad constraint: expression ends too early"},
		{"tensor_parallel", `bad constraint: "tensor_parallel": needs a comparison (<, <=, >, >=, ==, !=)`},
		{"tensor_parallel = 2", `bad constraint: "tensor_parallel = 2": "=" must be followed by =`},
		{"tensor_paralel == 2", `bad constraint: unknown setting "tensor_paralel" (did you mean tensor_parallel?)`},
		{"tensor_parallel == 2 2", `bad constraint: "tensor_parallel == 2 2": unexpected "2" after the comparison`},
		{"(tensor_parallel == 2", "bad constraint: missing )"},
		{"tensor_parallel == 'x", `bad constraint: "tensor_parallel == 'x": unterminated string`},
		{"tensor_parallel # 2", `bad constraint: "tensor_parallel # 2": unexpected character '#'`},
		{"1 == 1..2", `bad constraint: bad number "1..2"`},
		{strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40) + " == 1", "bad constraint: parentheses nested too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := ParseConstraint(tt.expr)
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrBadConstraint) {
				t.Errorf("\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestGrid(t *testing.T) {
	space, err := parseYAML(t, `tensor_parallel: [1, 2]
prefix_caching: {bool: true}
block_size: {int: [16, 48], step: 16}
gpu_memory_fraction: {float: [0.1, 0.3], step: 0.1}
`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := space.Size()
	if err != nil || n != 2*2*3*3 {
		t.Fatalf("Size = %d, %v", n, err)
	}
	grid, err := space.Grid()
	if err != nil {
		t.Fatal(err)
	}
	if len(grid) != n {
		t.Fatalf("len = %d", len(grid))
	}
	first := Settings{"tensor_parallel": 1, "prefix_caching": false, "block_size": 16, "gpu_memory_fraction": 0.1}
	second := Settings{"tensor_parallel": 1, "prefix_caching": false, "block_size": 16, "gpu_memory_fraction": 0.2}
	last := Settings{"tensor_parallel": 2, "prefix_caching": true, "block_size": 48, "gpu_memory_fraction": 0.3}
	if !reflect.DeepEqual(grid[0], first) || !reflect.DeepEqual(grid[1], second) || !reflect.DeepEqual(grid[n-1], last) {
		t.Errorf("order: %v %v ... %v", grid[0], grid[1], grid[n-1])
	}
	seen := map[string]bool{}
	for _, s := range grid {
		b, _ := json.Marshal(s)
		if seen[string(b)] {
			t.Errorf("duplicate point %s", b)
		}
		seen[string(b)] = true
	}

	// An aggregated point's shape settings configure nothing: the grid
	// holds the aggregated configuration once, and each disaggregated one.
	shapes, err := parseYAML(t, "tensor_parallel: [1]\ndisaggregated: {bool: true}\nprefill_replicas: [1, 2]\ndecode_replicas: [1, 2]")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := shapes.Grid()
	if err != nil {
		t.Fatal(err)
	}
	if len(sg) != 1+4 {
		t.Errorf("grid with shape keys: %d points, want 5 (one aggregated, four disaggregated): %v", len(sg), sg)
	}

	cont, err := parseYAML(t, "tensor_parallel: [1, 2]\ngpu_memory_fraction: {float: [0.8, 0.9]}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cont.Grid(); !errors.Is(err, ErrNotDiscrete) {
		t.Errorf("continuous grid: %v", err)
	}
	huge, err := parseYAML(t, "max_running_requests: {int: [1, 5000]}\nmax_batched_tokens: {int: [1, 5000]}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := huge.Size(); !errors.Is(err, ErrNotDiscrete) {
		t.Errorf("huge grid: %v", err)
	}
}

func BenchmarkGrid(b *testing.B) {
	space, err := parseYAML(b, `tensor_parallel: [1, 2, 4, 8]
max_running_requests: [16, 32, 64, 128, 256, 512]
max_batched_tokens: [2048, 4096, 8192, 16384]
quantization: [none, fp8]
prefix_caching: [true, false]
`)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := space.Grid(); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"tensor_parallel: [1, 2, 4]\nmax_running_requests: {int: [16, 1024], log: true}",
		"gpu_memory_fraction: {float: [0.8, 0.95], step: 0.05}\nextra_args: [--x]",
		"prefix_caching: {bool: true}\nconstraints: [\"tensor_parallel >= 1\"]\ntensor_parallel: 2",
		"quantization: [none, fp8, awq]\nkv_cache_dtype: auto",
		"block_size: {int: [1, 3]}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(src), &doc) != nil {
			return
		}
		space, err := Parse(&doc, "f.yaml")
		if err != nil {
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("error is not *yamlpos.Error: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		// A parsed space only yields settings that render and validate.
		if n, err := space.Size(); err == nil && n <= 1000 {
			grid, err := space.Grid()
			if err != nil || len(grid) != n {
				t.Fatalf("grid: %d points, %v; size %d", len(grid), err, n)
			}
			for _, s := range grid {
				if _, err := engine.Render(engine.VLLM, s); err != nil {
					t.Fatalf("render %v: %v", s, err)
				}
				if _, err := engine.Render(engine.SGLang, s); err != nil {
					t.Fatalf("render %v: %v", s, err)
				}
			}
		}
	})
}

func FuzzParseConstraint(f *testing.F) {
	for _, s := range []string{
		"max_batched_tokens >= max_running_requests",
		"tensor_parallel * pipeline_parallel <= 8",
		`quantization != "fp8"`,
		"(tensor_parallel + 1) / 2 < 3.5",
	} {
		f.Add(s)
	}
	s := Settings{"tensor_parallel": 2, "pipeline_parallel": 1, "max_batched_tokens": 2048,
		"max_running_requests": 64, "quantization": "fp8", "prefix_caching": true}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := ParseConstraint(expr)
		if err != nil {
			if !errors.Is(err, ErrBadConstraint) {
				t.Fatalf("error does not wrap ErrBadConstraint: %v", err)
			}
			return
		}
		_, _ = c.Holds(s) // must not panic
		if len(c.Names()) > len(engine.Names()) {
			t.Fatalf("names %v", c.Names())
		}
	})
}

// TestNewIsParse: a space built in Go is the space its spec text parses
// to, and New refuses what Parse refuses.
func TestNewIsParse(t *testing.T) {
	var doc yaml.Node
	src := "tensor_parallel: [1, 2]\nprefix_caching: [true, false]\ngpu_memory_fraction: [0.85, 0.9]\nquantization: [none, fp8]\nmax_model_len: 4096\n" +
		"constraints: [\"tensor_parallel <= 2\"]\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	want, err := Parse(doc.Content[0], "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := New([]Param{Choices("tensor_parallel", 1, 2), Choices("prefix_caching", true, false),
		Choices("gpu_memory_fraction", 0.85, 0.9), Choices("quantization", "none", "fp8"), Choices("max_model_len", 4096)},
		"tensor_parallel <= 2")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Params {
		want.Params[i].Line = 0
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("New\n%+v, Parse\n%+v", got, want)
	}
	for _, tc := range []struct {
		params      []Param
		constraints []string
		want        string
	}{
		{[]Param{Choices("max_num_seqs", 64)}, nil, "did you mean max_running_requests"},
		{[]Param{Choices("tensor_parallel", 1), Choices("tensor_parallel", 2)}, nil, "given twice"},
		{[]Param{Choices("tensor_parallel", 1, 1)}, nil, "listed twice"},
		{[]Param{Choices("gpu_memory_fraction", 1.5)}, nil, "gpu_memory_fraction"},
		{[]Param{Choices[int]("tensor_parallel")}, nil, "empty list"},
		{[]Param{Choices("tensor_parallel", 1)}, []string{"pipeline_parallel <= 2"}, "not a parameter of this space"},
	} {
		if _, err := New(tc.params, tc.constraints...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %v: %v, want %q", tc.params, tc.constraints, err, tc.want)
		}
	}
}

// TestParamDescribe: a parameter's values as a reader writes them.
func TestParamDescribe(t *testing.T) {
	for _, tc := range []struct {
		p        Param
		want     string
		searches bool
	}{
		{Param{Kind: KindCategorical, Choices: []any{2048, 4096, 8192}}, "2048, 4096 or 8192", true},
		{Param{Kind: KindCategorical, Choices: []any{"fp8"}}, "fp8", false},
		{Param{Kind: KindInt, Low: 16, High: 512, Log: true}, "16 to 512", true},
		{Param{Kind: KindFloat, Low: 0.8, High: 0.95}, "0.8 to 0.95", true},
		{Param{Kind: KindBool, Choices: []any{false, true}}, "false or true", true},
	} {
		if got := tc.p.Describe(); got != tc.want || tc.p.Searches() != tc.searches {
			t.Errorf("%+v: Describe %q, Searches %v; want %q, %v", tc.p, got, tc.p.Searches(), tc.want, tc.searches)
		}
	}
}
