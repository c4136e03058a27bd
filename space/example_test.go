package space_test

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/space"
)

func ExampleParse() {
	src := `tensor_parallel: [1, 2]
quantization: [none, fp8]
extra_args: ["--no-enable-log-requests"]
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		panic(err)
	}
	searchSpace, err := space.Parse(&doc, "study.yaml")
	if err != nil {
		panic(err)
	}
	grid, _ := searchSpace.Grid()
	for _, s := range grid {
		if err := searchSpace.Check(s, space.Context{AttentionHeads: 32, GPUs: 1}); err != nil {
			fmt.Println("skip:", err)
			continue
		}
		fmt.Println(strings.Join(engine.ServeCommand(engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct", s, searchSpace.Extra), " "))
	}
	// Output:
	// vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --no-enable-log-requests
	// vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --quantization fp8 --no-enable-log-requests
	// skip: infeasible settings: tensor×pipeline×data parallel = 2×1×1 needs 2 GPUs, 1 available
	// skip: infeasible settings: tensor×pipeline×data parallel = 2×1×1 needs 2 GPUs, 1 available
}

func ExampleParse_error() {
	var doc yaml.Node
	_ = yaml.Unmarshal([]byte("tensor_parallel: [1, 2]\nmax_num_seqs: [64]\n"), &doc)
	_, err := space.Parse(&doc, "study.yaml")
	fmt.Println(err)
	// Output:
	// study.yaml:2: space: unknown setting "max_num_seqs" (did you mean max_running_requests? --max-num-seqs is vLLM's flag)
}
