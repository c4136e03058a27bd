// Package bench is the benchmark client: workloads, open- and closed-loop load
// generation, a streaming OpenAI-compatible client and the metrics of
// DESIGN.md, computed from per-request records.
package bench
