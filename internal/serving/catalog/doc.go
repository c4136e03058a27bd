// Package catalog holds the hardware and model facts servetune reasons with:
// GPUs (memory as the engine sees it, HBM bandwidth, dense tensor rates, the
// GPU-to-GPU link, power and an hourly price with its date and source) and
// model shapes (layers, hidden size, attention and KV heads, MLP and MoE
// sizes, vocabulary). The built-in tables come from docs/reference.md (GPUs) and
// docs/reference.md (Models); any model can be imported from a Hugging Face
// config.json, and every figure is a plain struct field the caller may
// override.
//
// Looking up by id or alias is case-insensitive:
//
//	gpu, err := catalog.LookupGPU("H100-SXM")
//	if err != nil { ... }
//	m, err := catalog.LookupModel("llama-3.1-8b")
//	if err != nil { ... }
//	kv := m.KVBytesPerToken(2) // bf16 KV cache, all layers
//	fmt.Println(gpu.MemoryGiB, m.Params(), kv)
//
// Lookups return copies, so callers may change the returned values freely.
// All functions are safe for concurrent use; the built-in tables are never
// modified after package initialisation.
package catalog
