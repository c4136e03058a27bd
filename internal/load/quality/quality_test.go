package quality

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/model/sim"
)

// TestTasksAreRight checks every generated answer against the question
// itself, recomputed here, and the set's shape.
func TestTasksAreRight(t *testing.T) {
	tasks := Tasks(7, DefaultItems)
	arith := regexp.MustCompile(`What is (\d+) ([-+*]) (\d+)\?\nA:$`)
	count := regexp.MustCompile(`How many times does "(\w+)" appear in: ([a-z ]+)\?\nA:$`)
	date := regexp.MustCompile(`What date is (\d+) days (after|before) (\d{4}-\d{2}-\d{2})\? Answer as YYYY-MM-DD\.\nA:$`)
	kinds := map[string]int{}
	for _, tk := range tasks {
		kinds[tk.Kind]++
		if strings.Count(tk.Prompt, "\nA: ") != shots || !strings.HasSuffix(tk.Prompt, "\nA:") {
			t.Fatalf("task %d: prompt shape %q", tk.ID, tk.Prompt)
		}
		var want string
		switch tk.Kind {
		case KindArithmetic:
			m := arith.FindStringSubmatch(tk.Prompt)
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[3])
			want = strconv.Itoa(map[string]int{"+": a + b, "-": a - b, "*": a * b}[m[2]])
		case KindCopy:
			i := strings.LastIndex(tk.Prompt, "Repeat exactly: ")
			want = strings.TrimSuffix(tk.Prompt[i+len("Repeat exactly: "):], "\nA:")
		case KindCount:
			m := count.FindStringSubmatch(tk.Prompt)
			n := 0
			for _, w := range strings.Fields(m[2]) {
				if w == m[1] {
					n++
				}
			}
			want = strconv.Itoa(n)
		case KindDate:
			m := date.FindStringSubmatch(tk.Prompt)
			d, _ := strconv.Atoi(m[1])
			base, _ := time.Parse(time.DateOnly, m[3])
			if m[2] == "before" {
				d = -d
			}
			want = base.AddDate(0, 0, d).Format(time.DateOnly)
		}
		if tk.Answer != want {
			t.Errorf("task %d (%s): answer %q, the question says %q", tk.ID, tk.Kind, tk.Answer, want)
		}
	}
	for _, k := range Kinds {
		if kinds[k] != DefaultItems/len(Kinds) {
			t.Errorf("%d %s tasks of %d", kinds[k], k, DefaultItems)
		}
	}
	again := Tasks(7, DefaultItems)
	other := Tasks(8, DefaultItems)
	same := 0
	for i := range tasks {
		if tasks[i] != again[i] {
			t.Fatalf("task %d differs for the same seed", i)
		}
		if tasks[i].Prompt == other[i].Prompt {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d tasks alike for seeds 7 and 8", same)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{" 405": "405", "405.\n": "405", "\n 2021-03-04\nQ: next": "2021-03-04", "about 405": "about 405", "": ""} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// answerServer is an OpenAI-compatible server over loopback HTTP that knows
// the task set: it answers task i right unless wrong(i), with decoration
// a model adds (a leading space, a final period) that scoring forgives.
type answerServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []map[string]any
}

func newAnswerServer(t *testing.T, tasks []Task, wrong func(id int) bool, fail func(id int) bool) *answerServer {
	byPrompt := map[string]Task{}
	for _, tk := range tasks {
		byPrompt[tk.Prompt] = tk
	}
	s := &answerServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, body)
		s.mu.Unlock()
		prompt, _ := body["prompt"].(string)
		chat := r.URL.Path == "/v1/chat/completions"
		if chat {
			prompt = body["messages"].([]any)[0].(map[string]any)["content"].(string)
		}
		tk, ok := byPrompt[prompt]
		if !ok {
			http.Error(w, `{"error":"unknown prompt"}`, 400)
			return
		}
		if fail != nil && fail(tk.ID) {
			http.Error(w, `{"error":{"message":"CUDA error: an illegal memory access was encountered"}}`, 500)
			return
		}
		ans := " " + tk.Answer + "."
		if wrong(tk.ID) {
			ans = " " + tk.Answer + "0"
		}
		w.Header().Set("Content-Type", "application/json")
		if chat {
			fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, ans)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":%q,"finish_reason":"stop"}]}`, ans)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRunKnownAccuracy: servers whose accuracy is known give it back, the
// gate fails the one that drops too far and passes the one within the
// allowance, and the agreement counts the items answered alike.
func TestRunKnownAccuracy(t *testing.T) {
	ctx := context.Background()
	tasks := Tasks(1, 200)
	perfect := newAnswerServer(t, tasks, func(int) bool { return false }, nil)
	tenth := newAnswerServer(t, tasks, func(id int) bool { return id%10 == 3 }, nil)
	oneIn200 := newAnswerServer(t, tasks, func(id int) bool { return id == 17 }, nil)

	base, err := Run(ctx, openai.Target{BaseURL: perfect.URL, Model: "m"}, tasks, Options{})
	if err != nil || base.AccuracyPct != 100 || base.Correct != 200 || base.Simulated {
		t.Fatalf("perfect server: %+v, %v", base, err)
	}
	worse, err := Run(ctx, openai.Target{BaseURL: tenth.URL, Model: "m", Endpoint: openai.EndpointChat}, tasks, Options{Concurrency: 4})
	if err != nil || worse.AccuracyPct != 90 {
		t.Fatalf("90%% server: %.1f%%, %v", worse.AccuracyPct, err)
	}
	v := Judge(worse, base, 1.0)
	if !v.Scored || v.Pass || v.DropPct != 10 || v.AgreementPct != 90 || v.BaselineAccuracyPct != 100 {
		t.Errorf("verdict on the 90%% server: %+v", v)
	}
	if !strings.Contains(v.String(), "fails: accuracy 90.0% vs baseline 100.0% (drop 10.0 points, at most 1.0 allowed)") {
		t.Errorf("verdict line %q", v)
	}
	slight, err := Run(ctx, openai.Target{BaseURL: oneIn200.URL, Model: "m"}, tasks, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := Judge(slight, base, 1.0); !v.Pass || v.DropPct != 0.5 {
		t.Errorf("a drop of 0.5 points within 1.0: %+v", v)
	}
	// Greedy decoding, one answer each, stopped at the newline.
	for _, req := range perfect.requests {
		if req["temperature"] != 0.0 || req["stream"] != false || req["stop"].([]any)[0] != "\n" {
			t.Fatalf("request %v", req)
		}
	}
	if len(perfect.requests) != 200 {
		t.Errorf("%d requests for 200 tasks", len(perfect.requests))
	}
}

// TestRunErrors: unanswered tasks count wrong with the server's message;
// a server that answers nothing is an error.
func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	tasks := Tasks(3, 40)
	some := newAnswerServer(t, tasks, func(int) bool { return false }, func(id int) bool { return id < 4 })
	r, err := Run(ctx, openai.Target{BaseURL: some.URL, Model: "m"}, tasks, Options{})
	if err != nil || r.Errors != 4 || r.AccuracyPct != 90 || !strings.Contains(r.FirstError, "500") || !strings.Contains(r.FirstError, "illegal memory access") {
		t.Errorf("4 failed of 40: %+v, %v", r, err)
	}
	none := newAnswerServer(t, tasks, func(int) bool { return false }, func(int) bool { return true })
	if _, err := Run(ctx, openai.Target{BaseURL: none.URL, Model: "m"}, tasks, Options{}); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("a server that answers nothing: %v", err)
	}
	if _, err := Run(ctx, openai.Target{BaseURL: "http://127.0.0.1:1", Model: "m"}, tasks[:2], Options{}); !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("nothing listening: %v", err)
	}
}

// TestSimulatedEngineIsNotScored: the simulated engine answers with
// placeholder text and says so; the gate reports it cannot score rather
// than passing (or failing) anything.
func TestSimulatedEngineIsNotScored(t *testing.T) {
	cfg, err := sim.ParseArgs([]string{"llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0", "--time-scale", "50"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	hs := httptest.NewServer(srv.Handler())
	defer func() { cancel(); wg.Wait(); hs.Close() }()
	<-srv.Loaded()
	tasks := Tasks(1, 8)
	r, err := Run(context.Background(), openai.Target{BaseURL: hs.URL, Model: "llama-3.1-8b"}, tasks, Options{MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated {
		t.Fatalf("the simulated engine's answers were not marked: %+v", r)
	}
	v := Judge(r, r, 1.0)
	if v.Scored || v.Pass || !strings.Contains(v.String(), "not a model's") {
		t.Errorf("verdict on simulated answers: %+v", v)
	}
}
