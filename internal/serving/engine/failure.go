package engine

import (
	"fmt"
	"strings"
)

// Failure names why a trial failed. The values are stored.
type Failure string

// Failure classes of a trial.
const (
	FailNone        Failure = ""
	FailOOM         Failure = "oom"             // out of GPU (or container) memory: the configuration does not fit
	FailCrash       Failure = "crash"           // the engine exited while it was measured
	FailNotReady    Failure = "not_ready"       // no healthy /health within the ready timeout
	FailLaunchError Failure = "launch_error"    // could not start, or exited before ready for another reason
	FailBenchError  Failure = "bench_error"     // the benchmark itself failed
	FailRequests    Failure = "requests_failed" // the engine ran, but no request of any level succeeded
	FailInfeasible  Failure = "infeasible"      // rejected before launch by a constraint
	// FailScheduler: a batch scheduler ended the engine's job (cancelled,
	// time limit, node failure, preemption): not the configuration's fault.
	FailScheduler Failure = "scheduler"
	// FailQuality: the engine served, but its answers dropped below the
	// quality gate's baseline by more than allowed. A failure, not a
	// status: every ranking (sampler, Pareto front, confirmation,
	// recommendation) already leaves failed trials out, and the measured
	// levels stay stored beside both scores.
	FailQuality Failure = "quality_fail"
)

// Failures lists the failure classes in report order.
var Failures = []Failure{FailOOM, FailCrash, FailNotReady, FailLaunchError, FailBenchError, FailRequests, FailQuality, FailInfeasible, FailScheduler}

// Valid reports whether f is a failure class (or FailNone).
func (f Failure) Valid() bool {
	if f == FailNone {
		return true
	}
	for _, g := range Failures {
		if f == g {
			return true
		}
	}
	return false
}

// The engines' own start-up failure messages, as they print them. The
// simulated engine prints these exactly when a configuration does not fit.
const (
	// MsgNoCacheBlocks is vLLM's error when nothing is left for the KV cache.
	MsgNoCacheBlocks = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
	// MsgKVTooSmall is the stable part of vLLM's error when one request of
	// max_model_len does not fit the KV cache.
	MsgKVTooSmall = "KV cache is needed, which is larger than the available KV cache memory"
	// MsgCUDAOOM is torch's allocation failure (weights or CUDA graphs).
	MsgCUDAOOM = "CUDA out of memory."
)

// MsgSGLangNotEnough is SGLang's error when the KV pool is empty.
var MsgSGLangNotEnough = "Not enough memory. Please try to increase " + Flag(SGLang, "gpu_memory_fraction") + "."

// oomMarkers are lower-cased substrings of what vLLM, SGLang and PyTorch
// print when a configuration does not fit in memory (their exact texts are
// in failure_test.go).
var oomMarkers = []string{
	"no available memory for the cache blocks",                                // vLLM V1: KV memory <= 0
	"kv cache is needed, which is larger than the available kv cache memory",  // vLLM V1: max_model_len does not fit
	"larger than the maximum number of tokens that can be stored in kv cache", // vLLM V0: the same
	"is less than desired gpu memory utilization",                             // vLLM: the requested memory is not free
	"cuda out of memory",                        // PyTorch (weights, graphs, activations)
	"hip out of memory",                         // PyTorch on ROCm
	"outofmemoryerror",                          // torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
	"not enough memory. please try to increase", // SGLang: the KV pool is empty
	"not enough memory to allocate kv cache",    // SGLang, newer wording
	"insufficient memory",                       // variants of both
	"insufficient kv cache",                     // older vLLM wording
}

// OOMLine returns the last line of logs that reports running out of
// memory.
func OOMLine(logs string) (string, bool) {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.ToLower(lines[i])
		for _, m := range oomMarkers {
			if strings.Contains(l, m) {
				return strings.TrimSpace(lines[i]), true
			}
		}
	}
	return "", false
}

// Exit is how an engine process or container ended.
type Exit struct {
	Code      int  // exit status; 128+N when killed by signal N
	OOMKilled bool // the kernel's OOM killer ended it (a container's memory limit)
	// Scheduler, when set, says that a batch scheduler ended the engine's
	// job, in the scheduler's words (e.g. "slurm job 12 TIMEOUT").
	Scheduler string
}

// Classify names the failure of an engine that ended by itself, with a
// one-line message: out of memory when the kernel OOM-killed it or its
// output says so (the engine's own line), the scheduler's when a batch
// scheduler ended its job, else a crash when it had been serving, else a
// launch error. logs is the tail of its output.
func Classify(exit Exit, serving bool, logs string) (Failure, string) {
	when := "at start-up"
	if serving {
		when = "during the measurement"
	}
	if exit.OOMKilled {
		return FailOOM, fmt.Sprintf("killed by the kernel's out-of-memory killer %s (exit code %d)", when, exit.Code)
	}
	if exit.Scheduler != "" {
		// The engine's own last words may say why too; the scheduler's come
		// first, since they name the cause.
		msg := fmt.Sprintf("%s %s", exit.Scheduler, when)
		if last := LastLine(logs); last != "" {
			msg += "; the engine's last line: " + last
		}
		return FailScheduler, msg
	}
	if line, ok := OOMLine(logs); ok {
		return FailOOM, line
	}
	last := LastLine(logs)
	if serving {
		msg := fmt.Sprintf("engine exited during the measurement (exit code %d)", exit.Code)
		if last != "" {
			msg += ": " + last
		}
		return FailCrash, msg
	}
	msg := fmt.Sprintf("engine exited before it was ready (exit code %d)", exit.Code)
	if last != "" {
		msg += ": " + last
	}
	return FailLaunchError, msg
}

// LastLine returns the last non-empty line of s, trimmed.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
