package bench

import (
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
)

// HTTP is the OpenAI streaming client as a transport, for a caller that
// builds its own phase (its requests and their send times) instead of
// Run's workload: every request streams with ignore_eos, so each answer is
// as long as it asked for. Its Send keeps up to 4,096 idle connections.
func HTTP(t openai.Target) measure.Transport { return newHTTPTransport(t, 0, true, Sampling{}) }
