// Package trace reads production request traces and builds the prompts and
// conversations that replay them: one Request per trace line (its offset from
// the trace's start, input and output tokens, and, where the trace has them,
// the hash ids of its prompt's token blocks), a Schedule that sends each at
// its time, Prompts whose token blocks repeat exactly where the trace's
// blocks repeat (as token ids, or as words by Text; Shared counts what a
// prefix cache could reuse), and multi-turn Conversations whose turns carry
// the whole history. It is pure data and timing; the HTTP driving is
// internal/load/bench's.
//
// The formats, as their publishers define them:
//
//   - FormatMooncake: Mooncake's FAST'25 traces (github.com/kvcache-ai/Mooncake,
//     FAST25-release/traces and mooncake_trace.jsonl), JSON lines
//     {"timestamp": ms since the first request, "input_length": N,
//     "output_length": N, "hash_ids": [ids]}; each hash id names one
//     512-token block of the prompt, and equal ids are equal blocks, so two
//     requests that start with the same ids share that prefix.
//   - FormatAzure: the Azure LLM inference traces 2023 and 2024
//     (github.com/Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_conv.csv,
//     AzureLLMInferenceDataset2023.md), CSV with the header
//     TIMESTAMP,ContextTokens,GeneratedTokens and TIMESTAMP a wall-clock time
//     such as "2023-11-16 18:15:46.6805900" (a zone offset such as "+00:00"
//     is accepted too).
//   - FormatBurstGPT: BurstGPT (github.com/HPMLL/BurstGPT, data/BurstGPT_1.csv),
//     CSV with the header Timestamp,Model,Request tokens,Response tokens,
//     Total tokens,Log Type, Timestamp in seconds; the later release's
//     Session ID and Elapsed time columns are accepted. Rows whose Response
//     tokens are 0 are the trace's failed requests and are kept as they are.
//   - FormatJSONL: servetune's plain trace, one JSON object a line:
//     {"timestamp": seconds (a number, any origin), "input_tokens": N,
//     "output_tokens": N} and optionally "hash_ids": [ids] of 512-token
//     blocks, as Mooncake's.
//
// Every format: timestamps must not decrease, lengths must be present and
// not negative, columns and keys must be the format's own; the first problem
// is an *Error, one line naming the file, the line and the problem.
//
//	reqs, err := trace.Load("mooncake.jsonl", trace.FormatMooncake, trace.Options{Speed: 2, Max: 1000})
//	prompts := trace.Prompts(reqs, seed) // token ids; blocks shared as in the trace
//	err = trace.NewSchedule(reqs).Run(ctx, time.Now(), func(i int, at time.Time) { ... })
package trace
