package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/openai"
)

// mooncakeSample is internal/load/trace's sample Mooncake trace.
const mooncakeSample = "../trace/testdata/mooncake.jsonl"

// A trace dataset sends each request of the window once, at its trace time
// over the speed, with the trace's output length, and requests whose hash
// ids start alike send the same leading words.
func TestRunTraceOverHTTP(t *testing.T) {
	f := &fakeServer{TTFT: time.Millisecond, PerToken: 10 * time.Microsecond}
	srv := f.start(t)
	ds := DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample, Trace: &Trace{Format: "mooncake", Speed: 20}}
	res, err := Run(context.Background(), Config{
		Target:  openai.Target{BaseURL: srv.URL, Model: "m"},
		Dataset: ds, Seed: 3, NoAlign: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want, offsets, err := ds.traceRequests(rand.New(rand.NewPCG(1, 1)), MaxRequests, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != len(want) || res.Summary.Completed != len(want) {
		t.Fatalf("%d records, %d completed; the trace holds %d", len(res.Records), res.Summary.Completed, len(want))
	}
	// Sends are never early and typically on time: the median lateness,
	// not each request's, since a stall of this shared machine delays a
	// run of consecutive sends (the replay's own lateness is measured by
	// make trace-bench).
	var late []time.Duration
	for i, r := range res.Records {
		if r.Sched != offsets[i] {
			t.Errorf("request %d intended at %v, the trace says %v", i, r.Sched, offsets[i])
		}
		if r.Send < r.Sched {
			t.Errorf("request %d sent at %v, before its intended %v", i, r.Send, r.Sched)
		}
		late = append(late, r.Send-r.Sched)
		if r.OutputTokens != want[i].MaxTokens {
			t.Errorf("request %d: %d output tokens, the trace asks %d", i, r.OutputTokens, want[i].MaxTokens)
		}
	}
	slices.Sort(late)
	if med := late[len(late)/2]; med > 50*time.Millisecond {
		t.Errorf("median send lateness %v over %d requests, want at most 50 ms", med, len(late))
	}
	// Lines 1 and 4 start with hash ids 0..5 (3,037 tokens): the 4th
	// line's prompt starts with the whole 1st prompt; line 3 shares only
	// block 0 (512 tokens).
	if offsets[3] != 2516*time.Millisecond/20 {
		t.Errorf("4th offset %v, want 2.516 s / 20", offsets[3])
	}
	// The sample's input lengths are distinct: each names its prompt.
	prompts := f.promptsByLength()
	p0, p2, p3 := prompts[3037], prompts[2751], prompts[5163]
	if p0 == "" || !strings.HasPrefix(p3, p0+" ") {
		t.Error("request 4 does not start with request 1's 3,037 words")
	}
	// Each prompt is built as it is sent: the ones built up front for
	// the same seed, no others.
	eager, _, err := ds.traceRequests(rand.New(rand.NewPCG(3, streamData)), MaxRequests, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range eager {
		if _, ok := f.byText[r.Prompt]; !ok {
			t.Fatalf("request %d: the server got another prompt than the one built up front", i)
		}
	}
	w0, w2 := strings.Fields(p0), strings.Fields(p2)
	if strings.Join(w0[:512], " ") != strings.Join(w2[:512], " ") || w0[512] == w2[512] && w0[513] == w2[513] && w0[514] == w2[514] {
		t.Error("requests 1 and 3 should share exactly block 0's 512 words")
	}
}

// promptsByLength maps each prompt the server received to its word count.
func (f *fakeServer) promptsByLength() map[int]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]string{}
	for p := range f.byText {
		out[len(strings.Fields(p))] = p
	}
	return out
}

func TestTracePrefixes(t *testing.T) {
	reqs, _, err := DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample, Trace: &Trace{Format: "mooncake"}}.traceRequests(rand.New(rand.NewPCG(1, 1)), 5, false)
	if err != nil {
		t.Fatal(err)
	}
	// Lines 1 and 4 share blocks 0..5 (the 1st prompt's 3,037 tokens),
	// line 3 block 0 only with them; line 2 and 5 share nothing.
	if reqs[0].PrefixID < 0 || reqs[0].PrefixID != reqs[3].PrefixID || reqs[0].PrefixTokens != 3037 || reqs[3].PrefixTokens != 3072 {
		t.Errorf("lines 1 and 4: groups %d %d, tokens %d %d", reqs[0].PrefixID, reqs[3].PrefixID, reqs[0].PrefixTokens, reqs[3].PrefixTokens)
	}
	if reqs[2].PrefixTokens != 512 || reqs[2].PrefixID == reqs[0].PrefixID {
		t.Errorf("line 3: group %d, %d tokens", reqs[2].PrefixID, reqs[2].PrefixTokens)
	}
	if reqs[1].PrefixID != -1 || reqs[4].PrefixID != -1 {
		t.Errorf("lines 2 and 5 share nothing, have groups %d %d", reqs[1].PrefixID, reqs[4].PrefixID)
	}
}

func TestTraceDatasetErrors(t *testing.T) {
	for _, c := range []struct {
		d    DatasetSpec
		want string
	}{
		{DatasetSpec{Kind: DatasetTrace, Trace: &Trace{Format: "mooncake"}}, "needs a dataset path"},
		{DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample}, "needs a trace format"},
		{DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample, Trace: &Trace{Format: "csv"}}, `unknown trace format "csv"`},
		{DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample, Trace: &Trace{Format: "azure", Speed: -1}}, "speed -1"},
	} {
		err := c.d.Validate()
		if !errors.Is(err, ErrBadDataset) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.d, err, c.want)
		}
	}
	_, err := Run(context.Background(), Config{Target: openai.Target{BaseURL: "http://127.0.0.1:1", Model: "m"},
		Dataset: DatasetSpec{Kind: DatasetTrace, Path: mooncakeSample, Trace: &Trace{Format: "mooncake", Start: time.Hour}}})
	if !errors.Is(err, ErrBadDataset) || !strings.Contains(err.Error(), "no request in the window") {
		t.Errorf("an empty window: %v", err)
	}
}

// BenchmarkTraceReplay1000rps replays a trace of 1,000 requests a second
// (3,000 requests, one every millisecond; 16 prompt tokens, 2 output
// tokens) through Run to a loopback HTTP server, and reports the client's
// send lateness (measure.Client: actual minus intended send time), median
// and p99: the goal is under 1 ms and under 5 ms on an idle machine. It
// asserts nothing, as shared machines are noisy. `make trace-bench` runs
// it.
func BenchmarkTraceReplay1000rps(b *testing.B) {
	var lines strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&lines, "{\"timestamp\": %.3f, \"input_tokens\": 16, \"output_tokens\": 2}\n", float64(i)/1000)
	}
	path := filepath.Join(b.TempDir(), "1000rps.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	f := &fakeServer{}
	srv := f.start(b)
	var p50, p99 []float64
	for i := 0; b.Loop(); i++ {
		res, err := Run(context.Background(), Config{
			Target:  openai.Target{BaseURL: srv.URL, Model: "m"},
			Dataset: DatasetSpec{Kind: DatasetTrace, Path: path, Trace: &Trace{Format: "jsonl"}},
			Seed:    uint64(i), NoAlign: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		if res.Summary.Completed != 3000 || res.Summary.Client == nil {
			b.Fatalf("%d of 3000 completed", res.Summary.Completed)
		}
		p50 = append(p50, res.Summary.Client.SendLatenessP50)
		p99 = append(p99, res.Summary.Client.SendLatenessP99)
	}
	b.ReportMetric(slices.Max(p50), "median-late-ms")
	b.ReportMetric(slices.Max(p99), "p99-late-ms")
}
