package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/model/sim"
)

// TestSimRunSaysHowSureItIs runs a closed loop and a Poisson level through
// sim run: each level's table is followed by the fidelity suite's expected
// error for its load, engine and context, the closed loop taking the
// suite's fixed-concurrency runs (never the Poisson ones), and the result
// JSON carries the same bands.
func TestSimRunSaysHowSureItIs(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name   string
		load   []string
		regime sim.Regime
	}{
		{"closed loop", []string{"--max-concurrency", "16"}, sim.RegimeConcurrency},
		{"all at once", nil, sim.RegimeOffline},
		{"poisson", []string{"--request-rate", "4"}, ""}, // by Little's law, below
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jsonPath := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			args := append([]string{"sim", "run", "llama-3.1-8b", "--engine", "vllm", "--max-model-len", "4096", "--gpu", "H100-SXM",
				"--input-len", "512", "--output-len", "64", "--num-requests", "64", "--seed", "1", "--bootstrap", "10", "--json", jsonPath}, c.load...)
			code, stdout, stderr := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("code %d: %s", code, stderr)
			}
			var res struct {
				MeanE2E float64 `json:"mean_e2el_ms"`
				Meta    struct {
					Bands []simBand `json:"error_bands"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(mustRead(t, jsonPath), &res); err != nil {
				t.Fatal(err)
			}
			regime := c.regime
			if regime == "" {
				regime = sim.RegimeOf(4 * res.MeanE2E / 1000)
			}
			if len(res.Meta.Bands) != 3 {
				t.Fatalf("bands %+v: want TTFT, TPOT and E2EL", res.Meta.Bands)
			}
			for i, b := range res.Meta.Bands {
				want, basis := sim.ErrorBand(sim.Situation{Regime: regime, TP: 1, Engine: "vllm", Metrics: []string{b.Metric}})
				if b.Metric != []string{"ttft", "itl", "e2e"}[i] || b.Band != want || (basis != "" && b.Basis != basis) {
					t.Errorf("%s band %g (%q), want %g (%q)", b.Metric, b.Band, b.Basis, want, basis)
				}
				if basis != "" && !strings.Contains(basis, " at "+string(regime)+" load") && !strings.Contains(basis, "Poisson load") {
					t.Errorf("%s basis %q is not the %s runs'", b.Metric, basis, regime)
				}
			}
			head := fmt.Sprintf("Expected error (the simulator against real runs like this level: %s load, vllm):", regime)
			if !strings.Contains(stdout, head) {
				t.Errorf("table lacks %q:\n%s", head, stdout)
			}
		})
	}
}
