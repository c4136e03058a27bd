package sampler

import (
	"testing"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/spec"
)

func testSpace() space.Space {
	return space.Space{Params: []space.Param{
		{Name: "max_running_requests", Kind: space.KindInt, Low: 8, High: 512, Log: true},
		{Name: "gpu_memory_fraction", Kind: space.KindFloat, Low: 0.8, High: 0.95},
		{Name: "max_batched_tokens", Kind: space.KindInt, Low: 1024, High: 8192, Step: 1024},
		{Name: "quantization", Kind: space.KindCategorical, Choices: []any{"none", "fp8", "awq"}},
		{Name: "prefix_caching", Kind: space.KindBool},
	}}
}

// score is a toy objective; "awq" always fails.
func score(s space.Settings) (float64, bool) {
	if q, _ := s.String("quantization"); q == "awq" {
		return 0, true
	}
	m, _ := s.Int("max_running_requests")
	f, _ := s.Float("gpu_memory_fraction")
	return float64(m) * f, false
}

func TestSamplerProposesInRange(t *testing.T) {
	for _, kind := range []string{spec.SamplerTPE, spec.SamplerRandom, spec.SamplerCMAES} {
		t.Run(kind, func(t *testing.T) {
			s, err := New(kind, testSpace(), 7)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 15; i++ {
				p, err := s.Ask()
				if err != nil {
					t.Fatal(err)
				}
				m, ok := p.Settings.Int("max_running_requests")
				if !ok || m < 8 || m > 512 {
					t.Fatalf("max_running_requests = %v", p.Settings["max_running_requests"])
				}
				if b, ok := p.Settings.Int("max_batched_tokens"); !ok || b%1024 != 0 {
					t.Fatalf("max_batched_tokens = %v", p.Settings["max_batched_tokens"])
				}
				if _, ok := p.Settings.Bool("prefix_caching"); !ok {
					t.Fatalf("prefix_caching = %v", p.Settings["prefix_caching"])
				}
				v, failed := score(p.Settings)
				if err := s.Tell(p.ID, v, failed); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestSamplerSeeded(t *testing.T) {
	run := func() []space.Settings {
		s, err := New(spec.SamplerTPE, testSpace(), 3)
		if err != nil {
			t.Fatal(err)
		}
		var out []space.Settings
		for i := 0; i < 14; i++ {
			p, err := s.Ask()
			if err != nil {
				t.Fatal(err)
			}
			v, failed := score(p.Settings)
			if err := s.Tell(p.ID, v, failed); err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Settings)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if !sameSettings(a[i], b[i]) {
			t.Fatalf("proposal %d differs between equal seeds: %v vs %v", i, a[i], b[i])
		}
	}
}

// Failures are told as the worst value, so TPE proposes the failing choice
// less often than random search once it has learned.
func TestSamplerAvoidsFailures(t *testing.T) {
	count := func(kind string) int {
		s, err := New(kind, testSpace(), 11)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := 0; i < 40; i++ {
			p, err := s.Ask()
			if err != nil {
				t.Fatal(err)
			}
			v, failed := score(p.Settings)
			if failed && i >= 15 {
				bad++
			}
			if err := s.Tell(p.ID, v, failed); err != nil {
				t.Fatal(err)
			}
		}
		return bad
	}
	tpe, random := count(spec.SamplerTPE), count(spec.SamplerRandom)
	if tpe >= random || tpe > 5 {
		t.Errorf("failing choice proposed in the last 25 trials: tpe %d, random %d", tpe, random)
	}
}

func TestSamplerReplay(t *testing.T) {
	s, err := New(spec.SamplerTPE, testSpace(), 1)
	if err != nil {
		t.Fatal(err)
	}
	set := space.Settings{"max_running_requests": 64.0, "gpu_memory_fraction": 0.9,
		"max_batched_tokens": 2048.0, "quantization": "fp8", "prefix_caching": true}
	if err := s.Replay(set, 10, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Replay(space.Settings{"max_running_requests": 64, "gpu_memory_fraction": 0.9,
		"max_batched_tokens": 2048, "quantization": "awq", "prefix_caching": false}, 0, true); err != nil {
		t.Fatal(err)
	}
	bad := set.Clone()
	bad["quantization"] = "int3"
	if err := s.Replay(bad, 1, false); err == nil {
		t.Fatal("replayed a value outside the choices")
	}
	trials, _ := s.(*optuna).study.GetTrials()
	if len(trials) < 2 {
		t.Fatalf("study has %d trials after two replays", len(trials))
	}
}
