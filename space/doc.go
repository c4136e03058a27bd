// Package space is servetune's search space: the tunable engine launch
// settings by neutral name, their ranges, constraints, and the rendering of a
// point of the space as vLLM or SGLang flags.
//
// A space comes from the `space:` mapping of a study spec (see Parse). Each
// key is a neutral setting name (Names lists them: tensor_parallel,
// max_running_requests, gpu_memory_fraction, quantization, ...); unknown names
// are rejected with a suggestion, and every value is type- and range-checked
// against the setting, with the spec's file and line in the error (*yamlpos.Error).
//
// A point of the space is a Settings map (engine.Settings). The engine
// package owns the names, their values and their flags: engine.Render turns
// a point into an engine's flags and engine.ServeCommand into a command line:
//
//	var doc yaml.Node
//	_ = yaml.Unmarshal([]byte("tensor_parallel: [1, 2]\nquantization: [none, fp8]\n"), &doc)
//	searchSpace, err := space.Parse(doc.Content[0], "study.yaml")
//	if err != nil {
//		return err // study.yaml:1: space.tensor_parallel: ...
//	}
//	grid, _ := searchSpace.Grid() // 4 points
//	for _, s := range grid {
//		if err := searchSpace.Check(s, space.Context{AttentionHeads: 32, GPUs: 2}); err != nil {
//			continue // errors.Is(err, space.ErrInfeasible)
//		}
//		argv := engine.ServeCommand(engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct", s, searchSpace.Extra)
//		_ = argv // vllm serve meta-llama/Llama-3.1-8B-Instruct ...
//	}
//
// gpu_memory_fraction is passed through unchanged, but the engines read it
// differently (see the engine package's table): vLLM's is the share of the
// GPU's total memory for everything the engine allocates, SGLang's the
// share for the weights and the KV pool only. The same number gives SGLang
// the larger KV pool; the simulator's memory model applies each engine's
// accounting.
//
// Constraints (Constraint, ParseConstraint) are comparisons of small
// arithmetic expressions over settings, such as
// "max_batched_tokens >= max_running_requests".
//
// Everything in this package is a pure value: a Space, Param or Constraint
// may be used from many goroutines at once. Settings is a plain map with the
// usual rule: concurrent readers are fine, a writer needs exclusive access.
package space
