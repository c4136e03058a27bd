package engine

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPartsSplitTheShape(t *testing.T) {
	s := Settings{"disaggregated": true, "prefill_replicas": 2, "decode_replicas": 1,
		"prefill_tensor_parallel": 1, "decode_tensor_parallel": 4,
		"tensor_parallel": 2, "max_running_requests": 64}
	parts := s.Parts()
	var names []string
	for _, p := range parts {
		names = append(names, p.Name())
		for _, n := range ShapeNames() {
			if _, ok := p.Settings[n]; ok {
				t.Errorf("%s keeps the shape setting %s", p.Name(), n)
			}
		}
		if n, _ := p.Settings.Int("max_running_requests"); n != 64 {
			t.Errorf("%s lost max_running_requests: %v", p.Name(), p.Settings)
		}
	}
	if want := []string{"prefill 0", "prefill 1", "decode 0"}; !slices.Equal(names, want) {
		t.Fatalf("parts %v, want %v", names, want)
	}
	if parts[0].GPUs() != 1 || parts[2].GPUs() != 4 {
		t.Errorf("part GPUs %d and %d, want 1 and 4", parts[0].GPUs(), parts[2].GPUs())
	}
	if got := s.GPUs(); got != 6 {
		t.Errorf("GPUs = %d, want 1+1+4", got)
	}
	// Aggregated: the shape settings change nothing.
	agg := s.Clone()
	agg["disaggregated"] = false
	if agg.Parts() != nil || agg.GPUs() != 2 {
		t.Errorf("aggregated: parts %v, GPUs %d (want none, 2)", agg.Parts(), agg.GPUs())
	}
	// A missing role TP is the configuration's own.
	d := Settings{"disaggregated": true, "tensor_parallel": 2}
	if got := d.GPUs(); got != 4 {
		t.Errorf("default shape GPUs = %d, want 2+2", got)
	}
}

// TestPartsTakeTheirRolesBatchLimits: prefill_X and decode_X set X of
// their role's engines only, the other role keeping the configuration's,
// and each engine's command carries its own.
func TestPartsTakeTheirRolesBatchLimits(t *testing.T) {
	s := Settings{"disaggregated": true, "max_running_requests": 64, "max_batched_tokens": 2048,
		"prefill_max_running_requests": 8, "prefill_max_batched_tokens": 16384, "decode_max_running_requests": 256}
	want := map[Role][2]int{Prefill: {8, 16384}, Decode: {256, 2048}}
	for _, p := range s.Parts() {
		seqs, _ := p.Settings.Int("max_running_requests")
		toks, _ := p.Settings.Int("max_batched_tokens")
		if [2]int{seqs, toks} != want[p.Role] {
			t.Errorf("%s: max_running_requests %d, max_batched_tokens %d; want %v", p.Name(), seqs, toks, want[p.Role])
		}
		argv := ServeCommand(VLLM, "m", p.Settings, nil)
		line := ShellJoin(argv)
		for _, f := range []string{"--max-num-seqs " + strconv.Itoa(want[p.Role][0]), "--max-num-batched-tokens " + strconv.Itoa(want[p.Role][1])} {
			if !strings.Contains(line, f) {
				t.Errorf("%s: %s lacks %s", p.Name(), line, f)
			}
		}
	}
	for _, role := range []Role{Prefill, Decode} {
		for _, n := range RoleSettings() {
			if !slices.Contains(ShapeNames(), RoleSetting(role, n)) {
				t.Errorf("%s is no shape setting", RoleSetting(role, n))
			}
			if _, err := Render(VLLM, Settings{RoleSetting(role, n): 2}); err != nil {
				t.Errorf("%s: %v", RoleSetting(role, n), err)
			}
		}
	}
	// An aggregated configuration's role settings configure nothing: it
	// is one configuration whatever they say.
	a := Settings{"disaggregated": false, "max_running_requests": 64, "prefill_max_running_requests": 8}
	b := Settings{"disaggregated": false, "max_running_requests": 64, "prefill_max_running_requests": 16}
	if a.Key() != b.Key() {
		t.Errorf("aggregated keys differ by a role setting: %s, %s", a.Key(), b.Key())
	}
}

func TestShapeRendersNoFlag(t *testing.T) {
	s := Settings{"disaggregated": true, "prefill_replicas": 2, "decode_tensor_parallel": 2, "max_model_len": 4096}
	for _, e := range Engines {
		args, err := Render(e, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(args) != 2 {
			t.Errorf("%s: %v, want only the max_model_len flag", e, args)
		}
	}
}

func TestRoleArgsReadBack(t *testing.T) {
	kv := KVTransfer{Config: `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`,
		DecodeConfig: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer"}`, Backend: "nixl"}
	for _, tc := range []struct {
		e    Engine
		role Role
		set  string
		want string
	}{
		{VLLM, Prefill, "kv_transfer_config", kv.Config},
		{VLLM, Decode, "kv_transfer_config", kv.DecodeConfig},
		{SGLang, Prefill, "disaggregation_mode", "prefill"},
		{SGLang, Decode, "disaggregation_mode", "decode"},
	} {
		args := RoleArgs(tc.e, tc.role, kv)
		c, err := ParseCommand(append([]string{Flag(tc.e, "model"), "m"}, args...), nil)
		if err != nil {
			t.Fatalf("%s %s: %v: %v", tc.e, tc.role, args, err)
		}
		if got, _ := c.Settings.String(tc.set); got != tc.want {
			t.Errorf("%s %s: %s = %q, want %q", tc.e, tc.role, tc.set, got, tc.want)
		}
	}
	if got := RoleArgs(SGLang, Decode, kv); !slices.Contains(got, "nixl") {
		t.Errorf("SGLang role args %v lack the transfer backend", got)
	}
	if got := RoleArgs(VLLM, Prefill, KVTransfer{}); got[1] != DefaultKVTransferConfig {
		t.Errorf("default vLLM role args %v", got)
	}
	if _, err := ParseKVTransferConfig(DefaultKVTransferConfig); err != nil {
		t.Error(err)
	}
}

func TestKVLinkFromEnv(t *testing.T) {
	c, err := ParseCommand([]string{"serve", "m"}, func(k string) string {
		if k == EnvSimKVLink {
			return "infiniband"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Settings.String("sim_kv_link"); got != "infiniband" {
		t.Errorf("sim_kv_link = %q from %s", got, EnvSimKVLink)
	}
}

// An aggregated configuration's shape settings configure nothing: two that
// differ only there share a key, while disaggregated ones keep theirs.
func TestKeyLeavesOutInactiveShape(t *testing.T) {
	a := Settings{"tensor_parallel": 2, "disaggregated": false, "prefill_replicas": 1, "decode_tensor_parallel": 4}
	b := Settings{"tensor_parallel": 2, "disaggregated": false, "prefill_replicas": 3, "decode_tensor_parallel": 1}
	if a.Key() != b.Key() {
		t.Errorf("aggregated keys differ: %q %q", a.Key(), b.Key())
	}
	c := Settings{"tensor_parallel": 2}
	if a.Key() == c.Key() {
		t.Errorf("disaggregated=false dropped from the key: %q", a.Key())
	}
	a["disaggregated"], b["disaggregated"] = true, true
	if a.Key() == b.Key() {
		t.Errorf("disaggregated keys equal: %q", a.Key())
	}
}
