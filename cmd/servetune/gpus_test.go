package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestGPUsCommand(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"table", []string{"gpus"}},
		{"json", []string{"gpus", "--json"}},
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
