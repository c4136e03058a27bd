package quality

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/parallel"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Options tune Run; zero values take the defaults.
type Options struct {
	Concurrency int           // requests in flight; default 16
	MaxTokens   int           // per answer; default 32 (the longest answer is ~25 tokens)
	Timeout     time.Duration // per request; default 2 minutes
	Client      *http.Client  // default: a client of its own
	Progress    func(done, total int)
}

// Result is what a server answered to a task set.
type Result struct {
	Items       int                `json:"items"`
	Correct     int                `json:"correct"`
	Errors      int                `json:"errors"` // tasks the server did not answer (counted wrong)
	FirstError  string             `json:"first_error,omitempty"`
	AccuracyPct float64            `json:"accuracy_pct"`
	ByKindPct   map[string]float64 `json:"by_kind_pct"`
	// Outputs are the greedy answers as given (before Normalize), by task
	// ID: what the agreement with another configuration compares.
	Outputs []string `json:"outputs"`
	// Simulated says the server marked its answers as not a model's
	// (engine.SimAnswerHeader): the result scores nothing.
	Simulated bool `json:"simulated,omitempty"`
}

// ErrNoAnswer is wrapped by Run's error when no task got an answer.
var ErrNoAnswer = errors.New("the server answered no task")

// Run asks t every task with greedy decoding (temperature 0, stop at the
// first newline) and scores the answers by exact match after Normalize.
// A task the server fails to answer counts wrong; Run fails only when ctx
// ends or no task was answered at all.
func Run(ctx context.Context, t openai.Target, tasks []Task, o Options) (Result, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 32
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	hc := o.Client
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency}}
		defer hc.CloseIdleConnections()
	}
	res := Result{Items: len(tasks), Outputs: make([]string, len(tasks)), ByKindPct: map[string]float64{}}
	type answer struct {
		text      string
		simulated bool
		err       error
	}
	answers := make([]answer, len(tasks))
	var (
		mu   sync.Mutex
		done int
	)
	parallel.Each(ctx, len(tasks), o.Concurrency, func(i int) {
		text, sim, err := ask(ctx, hc, t, tasks[i].Prompt, o)
		answers[i] = answer{text, sim, err}
		if o.Progress != nil {
			mu.Lock()
			done++
			o.Progress(done, len(tasks))
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return res, err
	}
	perKind, correctKind := map[string]int{}, map[string]int{}
	for i, a := range answers {
		k := tasks[i].Kind
		perKind[k]++
		res.Simulated = res.Simulated || a.simulated
		if a.err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = a.err.Error()
			}
			continue
		}
		res.Outputs[i] = a.text
		if Normalize(a.text) == tasks[i].Answer {
			res.Correct++
			correctKind[k]++
		}
	}
	if len(tasks) > 0 {
		res.AccuracyPct = 100 * float64(res.Correct) / float64(len(tasks))
	}
	for k, n := range perKind {
		res.ByKindPct[k] = 100 * float64(correctKind[k]) / float64(n)
	}
	if len(tasks) > 0 && res.Errors == len(tasks) {
		return res, fmt.Errorf("%w: %d of %d failed, the first: %s", ErrNoAnswer, res.Errors, len(tasks), res.FirstError)
	}
	return res, nil
}

// completion is the part of a completions or chat response read here.
type completion struct {
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// ask sends one prompt and returns the answer text and whether the server
// marked it as not a model's.
func ask(ctx context.Context, hc *http.Client, t openai.Target, prompt string, o Options) (string, bool, error) {
	body := map[string]any{"model": t.Model, "max_tokens": o.MaxTokens, "temperature": 0, "top_p": 1,
		"stop": []string{"\n"}, "stream": false}
	path := t.Path()
	if t.Chat() {
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		body["prompt"] = prompt
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := t.Post(ctx, path, b)
	if err != nil {
		return "", false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The URL carries no secret; the key is a header, never echoed.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return "", false, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	sim := resp.Header.Get(engine.SimAnswerHeader) != ""
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", sim, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.Join(strings.Fields(string(raw)), " ")
		msg = t.Scrub(msg) // a server that echoes the key
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return "", sim, fmt.Errorf("POST %s: %s: %s", path, resp.Status, msg)
	}
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) == 0 {
		return "", sim, fmt.Errorf("POST %s: not a completion: %.200s", path, raw)
	}
	if t.Chat() {
		return c.Choices[0].Message.Content, sim, nil
	}
	return c.Choices[0].Text, sim, nil
}
