package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/gpu"
)

func TestGPUsCommand(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"table", []string{"gpus"}},
		{"json", []string{"gpus", "--json", "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &errb); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			s := out.String()
			if tt.name == "json" {
				var v struct {
					GPUs  []json.RawMessage `json:"gpus"`
					Error string            `json:"error"`
				}
				if err := json.Unmarshal(out.Bytes(), &v); err != nil {
					t.Fatalf("bad JSON %q: %v", s, err)
				}
				if len(v.GPUs) == 0 && !strings.HasPrefix(v.Error, "no GPU telemetry: ") {
					t.Errorf("no GPUs and no reason: %s", s)
				}
				return
			}
			if !strings.HasPrefix(s, "no GPU telemetry: ") && !strings.HasPrefix(s, "INDEX") {
				t.Errorf("unexpected output %q", s)
			}
		})
	}
}

// TestNoGPUTelemetry: on a host without NVML every command that samples
// GPUs says so in one line and goes on; nothing crashes or invents figures.
func TestNoGPUTelemetry(t *testing.T) {
	if n, err := gpu.Open(); err == nil {
		n.Close()
		t.Skip("this host has NVML: scripts/gpu-check.sh checks the telemetry")
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"gpus", "--watch", "1s"}, &out, &errb); code != exitOK ||
		!strings.HasPrefix(out.String(), "no GPU telemetry: ") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("gpus --watch: exit %d, %q %q", code, out.String(), errb.String())
	}
	srv := httptest.NewServer(&streamServer{})
	defer srv.Close()
	j := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--input-len", "8", "--output-len", "4",
		"--num-requests", "4", "--gpus", "0", "--no-progress", "--json", j)
	if code != exitOK {
		t.Fatalf("bench --gpus 0: exit %d: %s", code, stderr)
	}
	if strings.Count(stderr, "no GPU telemetry: ") != 1 || strings.Contains(stdout, "GPU (") {
		t.Errorf("bench --gpus 0 without NVML: stderr %q, stdout %q", stderr, stdout)
	}
	raw, _ := os.ReadFile(j)
	if bytes.Contains(raw, []byte(`"gpu":`)) {
		t.Errorf("GPU figures without NVML: %s", raw)
	}
	code, _, stderr = runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--gpus", "zero")
	if code != exitUsage || !strings.Contains(stderr, "--gpus") {
		t.Errorf("bench --gpus zero: exit %d, %q", code, stderr)
	}
}
