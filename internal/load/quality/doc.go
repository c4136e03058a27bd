// Package quality is the quality gate: does a configuration that changes
// the model's numerics (weight quantization, an FP8 KV cache) still answer
// as the baseline configuration does?
//
// Tasks generates a seeded set of questions with exact answers (arithmetic,
// copying nonsense words, counting words in a list, date arithmetic), each
// prompt three solved examples of its kind and the question; no download.
// Run asks an OpenAI-compatible server every task with greedy decoding
// (temperature 0, stop at the first newline) and scores exact matches;
// Judge sets a result against the baseline's: the drop in accuracy
// (percentage points) against the allowed one, and the agreement of the
// greedy answers item by item.
//
//	tasks := quality.Tasks(1, quality.DefaultItems)
//	base, _ := quality.Run(ctx, openai.Target{BaseURL: baseURL, Model: m}, tasks, quality.Options{})
//	cand, _ := quality.Run(ctx, openai.Target{BaseURL: fp8URL, Model: m}, tasks, quality.Options{})
//	v := quality.Judge(cand, base, 1.0) // v.Pass, v.DropPct, v.AgreementPct
//
// The simulated engine marks its completions as placeholder text
// (engine.SimAnswerHeader); Run records it and Judge then scores nothing,
// so a study on the simulator says its gate could not run instead of
// passing every configuration.
//
// Concurrency: Tasks, Normalize, Agreement and Judge are pure. Run may be
// called from several goroutines; each call owns its requests.
package quality
