package engine

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The simulated engine's contract with whoever starts it: a command line of
// the imitated engine (the flags of table, plus its own sim_* flags) and
// these environment variables, which stand in for the sim_* flags a
// launcher cannot add to an image's command line. A flag wins over its
// variable.
const (
	EnvSimGPU         = "SERVETUNE_SIM_GPU"
	EnvSimNumGPUs     = "SERVETUNE_SIM_NUM_GPUS"
	EnvSimTimeScale   = "SERVETUNE_SIM_TIME_SCALE"
	EnvSimLoadTime    = "SERVETUNE_SIM_LOAD_TIME"
	EnvSimEngine      = "SERVETUNE_SIM_ENGINE"
	EnvSimModelConfig = "SERVETUNE_SIM_MODEL_CONFIG"
	EnvSimCalibration = "SERVETUNE_SIM_CALIBRATION"
	// EnvSimSpecAcceptance is the draft tokens' acceptance rate under
	// speculative decoding, which no engine flag says.
	EnvSimSpecAcceptance = "SERVETUNE_SIM_SPEC_ACCEPTANCE"
)

// MaxTimeScale bounds how many times faster than real time the simulated
// engine runs: at 1,000 a 1 ms decode step is 1 us of this machine's time,
// about what one step's own bookkeeping costs, so a faster clock measures
// the host, not the model (a time_scale of 1e30 was stored as 201,100
// tok/s per GPU, 1e308 as +Inf).
const MaxTimeScale = 1000

// DefaultReadyTimeout is the longest wait from an engine's launch to its
// health when a study gives none (launcher.ready_timeout).
const DefaultReadyTimeout = 20 * time.Minute

// EnvEngineNonce and NonceHeader prove which process answers: a launcher
// gives each engine it starts a random value in EnvEngineNonce, and the
// simulated engine and router send it back in NonceHeader on every answer,
// so a readiness check is never satisfied by another trial's engine that
// took the port chosen for this one.
const (
	EnvEngineNonce = "SERVETUNE_ENGINE_NONCE"
	NonceHeader    = "X-Servetune-Engine-Nonce"
)

// WithNonce sets NonceHeader on every answer of h to the value this
// process was started with (EnvEngineNonce); h itself when it has none.
func WithNonce(h http.Handler) http.Handler {
	nonce := os.Getenv(EnvEngineNonce)
	if nonce == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(NonceHeader, nonce)
		h.ServeHTTP(w, r)
	})
}

// SimAnswerHeader marks every completion the simulated engine serves: its
// text is placeholder words in the requested number, not a model's
// answer, so whoever scores answers (the quality gate) must say it cannot,
// rather than score it. Its value says what the text is.
const (
	SimAnswerHeader = "X-Servetune-Simulated"
	SimAnswerValue  = "placeholder text, not a model's answer"
)

// simEnv maps each variable to the setting it stands in for.
var simEnv = []struct{ name, setting string }{
	{EnvSimGPU, "sim_gpu"}, {EnvSimNumGPUs, "sim_num_gpus"}, {EnvSimTimeScale, "sim_time_scale"},
	{EnvSimLoadTime, "sim_load_time"}, {EnvSimEngine, "sim_engine"}, {EnvSimModelConfig, "sim_model_config"},
	{EnvSimCalibration, "sim_calibration"}, {EnvSimSpecAcceptance, "sim_spec_acceptance"},
}

// SimImage is the image `make sim-image` builds: the simulated engine,
// FROM scratch, whose entry point takes vLLM's arguments as the
// vllm/vllm-openai image does.
const SimImage = "servetune-sim:dev"

// IsSimImage reports whether an image reference names the simulated
// engine's image (any tag of servetune-sim): it needs no GPU and takes its
// hardware from the environment.
func IsSimImage(ref string) bool {
	name, _, _ := strings.Cut(ref, ":")
	return name == "servetune-sim" || strings.HasSuffix(name, "/servetune-sim")
}

// SimEnv is the environment that tells a simulated engine the facts a real
// one would find on its host: the GPU model, the GPU count, and how fast
// its clock runs. Empty and zero values are left out.
func SimEnv(gpu string, numGPUs int, timeScale float64, loadTime string) []string {
	var env []string
	if gpu != "" {
		env = append(env, EnvSimGPU+"="+gpu)
	}
	if numGPUs > 0 {
		env = append(env, EnvSimNumGPUs+"="+strconv.Itoa(numGPUs))
	}
	if timeScale > 0 {
		env = append(env, EnvSimTimeScale+"="+strconv.FormatFloat(timeScale, 'g', -1, 64))
	}
	if loadTime != "" {
		env = append(env, EnvSimLoadTime+"="+loadTime)
	}
	return env
}
