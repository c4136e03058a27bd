package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConversationPairRecommendsDifferently is the "Done when" for
// the example pair, shortened: examples/conversation-sim.yaml and its
// random twin with the space cut to the question that parts them (one GPU
// or two, tensor parallel; the cache on, one token budget) and only the
// 32-session level. The conversation's history comes from the prefix
// cache, so one GPU meets the 800 ms TTFT p99 and gives twice the output
// per GPU; the twin prefills every token, misses it on one GPU, and is
// recommended two. The conversation's report shows the hit rate and each
// turn's TTFT behind it.
func TestConversationPairRecommendsDifferently(t *testing.T) {
	if testing.Short() {
		t.Skip("two real-clock studies against sim serve")
	}
	bin := buildServetune(t) // the sim launcher starts this binary's sim serve
	db := filepath.Join(t.TempDir(), "conv.db")
	shorten := strings.NewReplacer(
		"  prefix_caching: [true, false]\n", "  prefix_caching: [true]\n",
		"  max_batched_tokens: [512, 2048]\n", "  max_batched_tokens: [2048]\n",
		"load: {concurrency: [8, 32]}", "load: {concurrency: [32]}",
		"trials: 8,", "trials: 2,",
	)
	gpus := map[string]int{}
	for _, name := range []string{"conversation-sim", "conversation-random-sim"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "examples", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		src := shorten.Replace(string(raw))
		if strings.Count(src, "[2048]")+strings.Count(src, "[32]")+strings.Count(src, "trials: 2,") != 3 {
			t.Fatalf("%s: the example no longer has the space, levels or trials this test shortens", name)
		}
		spec := writeSpec(t, src)
		if out, err := exec.Command(bin, "tune", spec, "--db", db).CombinedOutput(); err != nil {
			t.Fatalf("tune %s: %v\n%s", name, err, out)
		}
		stdout, err := exec.Command(bin, "recommend", name, "--db", db, "--format", "json").Output()
		if err != nil {
			t.Fatalf("recommend %s: %v", name, err)
		}
		var rec struct {
			GPUs     int            `json:"gpus"`
			Settings map[string]any `json:"settings"`
		}
		if err := json.Unmarshal(stdout, &rec); err != nil {
			t.Fatalf("recommend %s --format json: %v: %s", name, err, stdout)
		}
		gpus[name] = rec.GPUs
		t.Logf("%s: recommended %v on %d GPUs", name, rec.Settings, rec.GPUs)
	}
	if gpus["conversation-sim"] != 1 || gpus["conversation-random-sim"] != 2 {
		t.Errorf("GPUs: conversation %d, random twin %d; want 1 and 2", gpus["conversation-sim"], gpus["conversation-random-sim"])
	}
	md, err := exec.Command(bin, "report", "conversation-sim", "--db", db, "--format", "md").Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	for _, want := range []string{"prefix-cache hit rate", "| turn |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the conversation's report lacks %q", want)
		}
	}
}
