package launcher

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/testengine"
)

// The test binary doubles as a tiny fake engine: when helperEnv is set, TestMain
// runs the named mode instead of the tests. Real processes, no mocks.
const helperEnv = "SERVETUNE_LAUNCHER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	code := m.Run()
	testengine.Cleanup()
	os.Exit(code)
}

// helperCommand is a Process command template that runs this binary in mode.
func helperCommand(t *testing.T, mode string, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"env", helperEnv + "=" + mode, exe}, args...)
}

func helperMain(mode string, args []string) int {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	port := fs.Int("port", 0, "")
	delay := fs.Duration("delay", 0, "")
	fs.String("model", "", "")
	kv := fs.String("kv-transfer-config", "", "")
	fs.Int("tensor-parallel-size", 1, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
		return 3
	case "sleep":
		// An engine that runs until it is killed.
		time.Sleep(time.Hour)
		return 0
	case "up":
		fmt.Println("up")
		time.Sleep(time.Hour) // the same engine, saying once that it runs
		return 0
	case "spam":
		line := strings.Repeat("x", 99) + "\n"
		for range 10000 { // 1 MB
			os.Stdout.WriteString(line)
		}
		fmt.Println("END-OF-SPAM")
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), helperEnv+"=sleep")
		if err := child.Start(); err != nil {
			return 1
		}
		fmt.Printf("child=%d\n", child.Process.Pid)
	case "parent":
		// An engine's parent: launch "sleep" through Process, report the
		// engine's pid, then wait to be killed.
		in, err := (&Process{Command: []string{os.Args[0]}}).Launch(context.Background(), Spec{
			Env: []string{helperEnv + "=sleep"},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("engine=%d\n", in.(*processInstance).cmd.Process.Pid)
		time.Sleep(time.Hour) // until killed
		return 0
	case "disagg":
		// A disaggregated part: the prefill one (its connector role
		// kv_producer) runs out of memory at start-up.
		if strings.Contains(*kv, "kv_producer") {
			fmt.Fprintln(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
			return 1
		}
	case "serve", "router", "ident":
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	fmt.Printf("env SECRET_FOR_TEST set: %v\n", os.Getenv("SECRET_FOR_TEST") != "")
	fmt.Fprintf(os.Stderr, "serving on port %d after %v\n", *port, *delay)
	start := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if time.Since(start) < *delay {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	})
	mux.HandleFunc("GET /args", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Join(fs.Args(), " "))
	})
	mux.HandleFunc("GET /secret", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, os.Getenv("SECRET_FOR_TEST"))
	})
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = http.Serve(l, engine.WithNonce(mux)) // as sim serve answers
	return 1
}
