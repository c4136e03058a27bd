package sim

import (
	"fmt"

	"github.com/servetune/servetune/internal/serving/engine"
)

// admitLength applies the engine's request-length checks to a prompt of
// prompt tokens that asks for maxTokens output tokens (0: max_tokens
// unset) on a context of maxLen tokens. It returns how many tokens the
// engine will generate at most, or the message of its 400.
//
// vLLM rejects prompt + max_tokens over max_model_len and fills the
// context when max_tokens is unset (contextLengthMessage).
//
// SGLang rejects a prompt of context_length tokens or more, and a given
// max_new_tokens whose sum with the prompt exceeds context_length, with a
// 400 (TokenizerManager._validate_one_request, sgl-project/sglang
// python/sglang/srt/managers/tokenizer_manager.py at
// 001067fffe33427bee0ed2f007fb7551a1d76b44; its 0.4-era form inside
// _tokenize_one_request already raised both, with >= for the sum). What
// passes is clipped, not rejected: the scheduler caps max_new_tokens at
// max_req_len - input - 1 with max_req_len = context_length - 1
// (python/sglang/srt/managers/tp_worker.py at
// 0045f98eb3b122ae69e82722b3e0ff5392547f7a; scheduler.py
// init_req_max_new_tokens today), so an unset max_tokens generates
// context_length - 2 - prompt tokens. The pool bound on max_req_len
// (max_total_num_tokens - 1) and --allow-auto-truncate are not modelled.
func admitLength(eng engine.Engine, maxLen, prompt, maxTokens int) (int, string) {
	if prompt <= 0 {
		return 0, "The decoder prompt cannot be empty"
	}
	if maxTokens < 0 {
		return 0, fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens)
	}
	if eng != engine.SGLang {
		maxOut := maxTokens
		if maxOut == 0 {
			maxOut = maxLen - prompt
		}
		switch {
		case maxOut < 1:
			return 0, fmt.Sprintf("max_tokens must be at least 1, got %d.", maxOut)
		case prompt+maxOut > maxLen:
			return 0, contextLengthMessage(maxLen, prompt, maxOut)
		}
		return maxOut, ""
	}
	if prompt >= maxLen {
		return 0, sglangInputTooLong(maxLen, prompt)
	}
	if maxTokens > 0 && prompt+maxTokens > maxLen {
		return 0, fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			maxLen, prompt+maxTokens, prompt, maxTokens)
	}
	maxOut := maxLen - 2 - prompt // max_req_len - input - 1
	if maxTokens > 0 {
		maxOut = min(maxOut, maxTokens)
	}
	if maxOut < 1 {
		// The scheduler aborts such a prompt (max_req_input_len); its
		// wording is not modelled, the tokenizer's is.
		return 0, sglangInputTooLong(maxLen, prompt)
	}
	return maxOut, ""
}

// sglangInputTooLong is SGLang's 400 for a prompt the context cannot hold.
func sglangInputTooLong(maxLen, prompt int) string {
	return fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", prompt, maxLen)
}
