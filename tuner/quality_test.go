package tuner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/servetune/servetune/tuner/memory"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/quality"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
)

// knownQuality launches, for each trial, the simulated engine on the real
// clock (50 times faster) behind a loopback HTTP server that answers the
// quality gate's tasks like a model of known accuracy: right for every
// configuration, except that an FP8-quantized one gets every fifth task
// wrong (80%). The load is the simulator's, so FP8 is also the faster: the
// gate alone must keep it from being recommended.
type knownQuality struct {
	t       *testing.T
	answers map[string]quality.Task
	mu      sync.Mutex
	evals   map[string]int // quantization -> tasks asked
}

const knownScale = 50

func (l *knownQuality) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{TimeScale: knownScale}
}

func (l *knownQuality) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	cfg, err := sim.FromSettings(spec.Engine, spec.Model, "", "H100-SXM", max(len(spec.GPUs), 1), spec.Settings)
	if err != nil {
		return nil, err
	}
	cfg.TimeScale, cfg.LoadTime = knownScale, 0
	srv, err := sim.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	quant, _ := spec.Settings.String("quantization")
	ectx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ectx) })
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Prompt string `json:"prompt"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		tk, eval := l.answers[req.Prompt]
		if r.URL.Path != "/v1/completions" || req.Stream || !eval {
			r.Body = io.NopCloser(bytes.NewReader(body))
			srv.Handler().ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		l.evals[quant]++
		l.mu.Unlock()
		ans := tk.Answer
		if quant == "fp8" && tk.ID%5 == 0 {
			ans += "1"
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":%q,"finish_reason":"stop"}]}`, " "+ans)
	}))
	select {
	case <-srv.Loaded():
	case <-ctx.Done():
	}
	return &knownInstance{hs: hs, stop: func() { stop(); wg.Wait(); hs.Close() }}, nil
}

type knownInstance struct {
	hs   *httptest.Server
	once sync.Once
	stop func()
}

func (i *knownInstance) Endpoint() string            { return i.hs.URL }
func (i *knownInstance) Ready(context.Context) error { return nil }
func (i *knownInstance) Logs() string                { return "" }
func (i *knownInstance) Stop(context.Context) error  { i.once.Do(i.stop); return nil }

const qualitySpec = `name: gate
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: sim, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  quantization: [none, fp8]
  max_running_requests: 64
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [16]}
  requests_per_level: 32
  warmup: 0
slo: {ttft_p99_ms: 60000}
objectives: [max output_throughput_per_gpu]
tuner: {sampler: grid, trials: 2, seed: 5, objective: max output_throughput_per_gpu, confirm: false}
quality: {baseline: {quantization: none}, max_drop_pct: 1.0, items: 60}
`

// TestQualityGateStudy is the case: a study whose FP8
// configuration is the faster but answers worse than allowed stores that
// trial as failed/quality_fail with both scores, and recommends the next
// best. The baseline is asked once; a resumed study reuses it.
func TestQualityGateStudy(t *testing.T) {
	parsed := mustSpec(t, qualitySpec)
	l := &knownQuality{t: t, answers: map[string]quality.Task{}, evals: map[string]int{}}
	for _, tk := range quality.Tasks(5, 60) {
		l.answers[tk.Prompt] = tk
	}
	db := openStore(t)
	var notes []string
	study := &Study{Spec: parsed, Launcher: l, Store: db, Memory: memory.Model{}, OnNote: func(m string) { notes = append(notes, m) }}
	if _, err := study.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := db.GetStudy(context.Background(), "gate")
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := ParseQualityBaseline(st.QualityBaseline)
	if err != nil || !ok || b.Result.AccuracyPct != 100 || b.NotApplied != "" || b.Items != 60 {
		t.Fatalf("stored baseline %+v, %v (notes %q)", b, err, notes)
	}
	trials, err := db.Trials(context.Background(), st.ID)
	if err != nil {
		t.Fatal(err)
	}
	var fp8, none *store.Trial
	for i := range trials {
		switch q, _ := trials[i].Settings.String("quantization"); q {
		case "fp8":
			fp8 = &trials[i]
		case "none":
			none = &trials[i]
		}
	}
	if fp8 == nil || none == nil {
		t.Fatalf("trials %+v", trials)
	}
	if fp8.Status != measure.StatusFailed || fp8.Failure != engine.FailQuality || fp8.Quality == nil ||
		fp8.Quality.AccuracyPct != 80 || fp8.Quality.BaselineAccuracyPct != 100 || fp8.Quality.DropPct != 20 || fp8.Quality.AgreementPct != 80 {
		t.Errorf("fp8 trial: %s/%s %q %+v", fp8.Status, fp8.Failure, fp8.FailureMsg, fp8.Quality)
	}
	if !strings.Contains(fp8.FailureMsg, "accuracy 80.0% vs baseline 100.0%") || len(fp8.LoadPoints) != 1 {
		t.Errorf("fp8 failure message %q, %d levels kept", fp8.FailureMsg, len(fp8.LoadPoints))
	}
	if none.Status != measure.StatusOK || none.Quality == nil || !none.Quality.Pass || none.Quality.AgreementPct != 100 {
		t.Errorf("baseline-equal trial: %s %+v", none.Status, none.Quality)
	}
	// FP8 was the faster: without the gate it would win.
	fast := fp8.LoadPoints[0].Summary.OutputThroughput
	slow := none.LoadPoints[0].Summary.OutputThroughput
	t.Logf("output tok/s: fp8 %.0f (quality_fail), none %.0f", fast, slow)
	rec, err := recommend.RecommendStudy(trials, parsed.Terms(), recommend.PreferThroughput)
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := rec.Best.Point.Settings.String("quantization"); q != "none" {
		t.Errorf("recommended %v", rec.Best.Point.Settings)
	}
	// Baseline (60) and each trial (60): 60 tasks per configuration run.
	if l.evals["none"] != 120 || l.evals["fp8"] != 60 {
		t.Errorf("tasks asked %v", l.evals)
	}

	// A resume with more trials reuses the stored baseline.
	sp2 := mustSpec(t, strings.Replace(qualitySpec, "trials: 2", "trials: 3", 1))
	study = &Study{Spec: sp2, Launcher: l, Store: db, Resume: true, Memory: memory.Model{}}
	if _, err := study.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.evals["none"] != 120 {
		t.Errorf("the resume asked the baseline again: %v", l.evals)
	}
}

// TestQualityGateOnSimulator: on the simulated engine the gate says it
// cannot score, in a note and with the study, and every trial stays ok:
// nothing is passed that was not scored, nothing is failed either.
func TestQualityGateOnSimulator(t *testing.T) {
	parsed := mustSpec(t, strings.Replace(strings.Replace(studySpec, "confirm: false}", "confirm: false}\nquality: {baseline: {tensor_parallel: 1}}", 1), "trials: 6", "trials: 2", 1))
	db := openStore(t)
	var notes []string
	study := &Study{Spec: parsed, Store: db, Memory: memory.Model{}, OnNote: func(m string) { notes = append(notes, m) }}
	if _, err := study.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "quality gate not applied: the virtual launcher's simulated engine generates no text") {
		t.Errorf("notes %q", notes)
	}
	st, _ := db.GetStudy(context.Background(), "vt")
	b, ok, _ := ParseQualityBaseline(st.QualityBaseline)
	if !ok || b.NotApplied == "" {
		t.Errorf("stored baseline %+v", b)
	}
	trials, _ := db.Trials(context.Background(), st.ID)
	for _, tr := range trials {
		if tr.Failure == engine.FailQuality || tr.Quality != nil {
			t.Errorf("trial %d judged on the simulator: %s %+v", tr.Number, tr.Failure, tr.Quality)
		}
	}
}

func TestQualitySpec(t *testing.T) {
	study := mustSpec(t, qualitySpec)
	if study.Quality == nil || study.Quality.MaxDropPct != 1 || study.Quality.Items != 60 || study.Quality.Baseline["quantization"] != "none" {
		t.Fatalf("quality %+v", study.Quality)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"quality: {baseline: {quantization: none}, max_drop_pct: 1.0, items: 60}", "quality: {max_drop_pct: 1}", "quality.baseline: missing"},
		{"baseline: {quantization: none}", "baseline: {quantization: [none, fp8]}", "quality.baseline.quantization: one value"},
		{"baseline: {quantization: none}", "baseline: {quantisation: none}", "quality.baseline.quantisation"},
		{"baseline: {quantization: none}", "baseline: {quantization: fp7}", "quality.baseline.quantization"},
		{"max_drop_pct: 1.0", "max_drop_pct: -1", "quality.max_drop_pct"},
		{"items: 60", "items: 2", "quality.items"},
		{"baseline: {quantization: none}", "baseline: {quantization: none, tensor_parallel: 2}", "quality.baseline: needs 2 GPUs"},
		{"items: 60}", "items: 60, seed: 1}", "quality"},
	} {
		_, _, err := ParseSpec([]byte(strings.Replace(qualitySpec, tc.from, tc.to, 1)), "g.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.to, err, tc.want)
		}
	}
	fixed := strings.Replace(qualitySpec, "quantization: [none, fp8]", "quantization: none", 1)
	if _, _, err := ParseSpec([]byte(strings.Replace(fixed, "launcher: {kind: sim, gpus: [0]}", `launcher: {kind: endpoint, base_url: "http://127.0.0.1:1"}`, 1)), "g.yaml"); err == nil || !strings.Contains(err.Error(), "cannot start the baseline") {
		t.Errorf("endpoint launcher with a gate: %v", err)
	}
}

// baselineSpec fixes max_model_len in the space: Llama-3.1-8B's own
// context (131,072 tokens, 16 GiB of KV cache) does not fit an L4 beside
// its weights, 8,192 does.
const baselineSpec = `name: qb
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: L4}
space:
  quantization: [none, fp8]
  max_model_len: 8192
  max_running_requests: {int: [8, 16]}
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4]}
  requests_per_level: 8
  warmup: 0
slo: {ttft_p99_ms: 60000}
tuner: {sampler: grid, trials: 2, seed: 5, confirm: false}
quality: {baseline: {quantization: none}}
`

// TestQualityBaselineTakesFixedValues: the baseline names only
// quantization; it starts with the space's fixed values (max_model_len
// 8192), not the engine's default context, which does not fit.
func TestQualityBaselineTakesFixedValues(t *testing.T) {
	parsed := mustSpec(t, baselineSpec)
	db := openStore(t)
	var notes []string
	study := &Study{Spec: parsed, Store: db, Memory: memory.Model{}, OnNote: func(m string) { notes = append(notes, m) }}
	if _, err := study.Run(context.Background()); err != nil {
		t.Fatalf("%v (notes %q)", err, notes)
	}
	st, _ := db.GetStudy(context.Background(), "qb")
	b, ok, _ := ParseQualityBaseline(st.QualityBaseline)
	if !ok || b.Failed != "" || !hasInt(b.Settings, "max_model_len", 8192) || b.Settings["quantization"] != "none" {
		t.Errorf("stored baseline %+v (notes %q)", b, notes)
	}
	if _, ranged := b.Settings["max_running_requests"]; ranged {
		t.Errorf("the baseline took a searched setting: %v", b.Settings)
	}
}

// TestQualityBaselineFailsAsATrial: a baseline that cannot start (its own
// max_model_len does not fit) is stored as failed with the engine's words,
// said in a note, and the study goes on without the gate.
func TestQualityBaselineFailsAsATrial(t *testing.T) {
	parsed := mustSpec(t, strings.Replace(baselineSpec, "{quantization: none}", "{quantization: none, max_model_len: 131072}", 1))
	db := openStore(t)
	var notes []string
	study := &Study{Spec: parsed, Store: db, Memory: memory.Model{}, OnNote: func(m string) { notes = append(notes, m) }}
	out, err := study.Run(context.Background())
	if err != nil {
		t.Fatalf("the study stopped: %v (notes %q)", err, notes)
	}
	st, _ := db.GetStudy(context.Background(), "qb")
	b, ok, _ := ParseQualityBaseline(st.QualityBaseline)
	if !ok || !strings.Contains(b.Failed, engine.MsgKVTooSmall) || !strings.Contains(b.NotApplied, "the baseline did not start") {
		t.Errorf("stored baseline %+v", b)
	}
	if joined := strings.Join(notes, "\n"); !strings.Contains(joined, "quality gate not applied: the baseline did not start") {
		t.Errorf("notes %q", notes)
	}
	trials, _ := db.Trials(context.Background(), st.ID)
	if len(trials) != 2 || out.StudyID != st.ID {
		t.Fatalf("%d trials after a failed baseline", len(trials))
	}
	for _, tr := range trials {
		if tr.Status != measure.StatusOK || tr.Quality != nil {
			t.Errorf("trial %d: %s/%s %+v", tr.Number, tr.Status, tr.Failure, tr.Quality)
		}
	}
}

func hasInt(s engine.Settings, name string, want int) bool {
	v, ok := s.Int(name)
	return ok && v == want
}
