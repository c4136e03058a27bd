package launcher

import "strings"

// Failure is why an engine ended, as a trial records it.
type Failure string

const (
	FailureNone  Failure = ""      // still running, or stopped by us
	FailureOOM   Failure = "oom"   // out of GPU or host memory: the config does not fit
	FailureCrash Failure = "crash" // any other exit
)

// oomMessages are what engines print when a configuration does not fit in
// memory (reference/engines.md); a lower-cased substring match.
var oomMessages = []string{
	"no available memory for the cache blocks",                        // vLLM: KV memory <= 0
	"kv cache is needed, which is larger than the available",          // vLLM: max_model_len does not fit
	"cuda out of memory",                                              // PyTorch
	"outofmemoryerror",                                                // torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
	"not enough memory. please try to increase --mem-fraction-static", // SGLang
	"insufficient memory",                                             // vLLM/SGLang variants
}

// Classify names the failure of an engine that exited with exitCode, given
// whether the kernel OOM-killed it and the tail of its logs. It is pure, so a
// trial can classify a process, a container or a stored log tail alike.
func Classify(exitCode int, oomKilled bool, logs string) Failure {
	if oomKilled {
		return FailureOOM
	}
	if IsOOMMessage(logs) {
		return FailureOOM
	}
	if exitCode == 0 {
		return FailureNone
	}
	return FailureCrash
}

// IsOOMMessage reports whether logs contain an engine's out-of-memory message.
func IsOOMMessage(logs string) bool {
	l := strings.ToLower(logs)
	for _, m := range oomMessages {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}
