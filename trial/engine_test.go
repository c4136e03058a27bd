package trial

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The test binary doubles as a tiny engine so trials launch a real process
// that serves real HTTP on loopback. TRIAL_TEST_ENGINE picks its behaviour:
//
//	ok     serve /health and streaming /v1/completions
//	oom    print a vLLM start-up OOM message and exit 1
//	hang   never answer /health
//	crash  serve, then exit after CRASH_AFTER completions
const engineEnv = "TRIAL_TEST_ENGINE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(engineEnv); mode != "" {
		os.Exit(fakeEngine(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

func fakeEngine(mode, port string) int {
	// OOM_IF_ARG: a part of a disaggregated trial whose flags hold it
	// (its connector role) runs out of memory at start-up.
	if m := os.Getenv("OOM_IF_ARG"); m != "" && slices.ContainsFunc(os.Args, func(a string) bool { return strings.Contains(a, m) }) {
		mode = "oom"
	}
	switch mode {
	case "oom":
		fmt.Fprintln(os.Stderr, "INFO loading weights took 1.2 s")
		fmt.Fprintln(os.Stderr, "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
		return 1
	case "hang":
		time.Sleep(time.Minute) // an engine that never answers: the hang is what the test sees
		return 0
	}
	crashAfter, _ := strconv.Atoi(os.Getenv("CRASH_AFTER"))
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		if crashAfter > 0 && served.Add(1) > int64(crashAfter) {
			fmt.Fprintln(os.Stderr, "RuntimeError: engine core died unexpectedly")
			os.Exit(3)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		const out = 4
		for i := 0; i < out; i++ {
			time.Sleep(time.Millisecond) // a token's time to decode, as an engine takes it
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" tok\",\"finish_reason\":%s}]}\n\n", finish(i == out-1))
			f.Flush()
		}
		fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", out, 16+out)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = http.Serve(ln, mux)
	return 0
}

func finish(last bool) string {
	if last {
		return `"length"`
	}
	return "null"
}
