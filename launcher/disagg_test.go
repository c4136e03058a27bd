package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// disaggSpec is a trial of two prefill engines and one decode engine.
func disaggSpec(t *testing.T) Spec {
	return Spec{Engine: engine.VLLM, Model: "m", GPUs: []int{4, 5, 6}, Trial: 7,
		Study: fmt.Sprintf("disagg-%s-%d", t.Name(), os.Getpid()),
		Settings: engine.Settings{"disaggregated": true, "prefill_replicas": 2, "decode_replicas": 1,
			"prefill_tensor_parallel": 1, "decode_tensor_parallel": 1}}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDisaggregatedTrial: the parts and the router start as one trial, the
// router is told every part's endpoint, and Stop leaves no process of the
// study.
func TestDisaggregatedTrial(t *testing.T) {
	d := &Disaggregated{
		Base:   &Process{Command: helperCommand(t, "serve", "--port", "{port}")},
		Router: Router{Command: helperCommand(t, "router", "--port", "{port}", "--", "{prefill_urls}", "P", "{decode_ports}"), EachDecode: []string{"D={url}"}},
		KVLink: "infiniband",
	}
	spec := disaggSpec(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(context.Background())
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\n%s", err, in.Logs())
	}
	args := strings.Fields(get(t, in.Endpoint()+"/args"))
	// prefill URL, prefill URL, "P", decode port, "D=<decode URL>"
	if len(args) != 5 || args[2] != "P" || !strings.HasPrefix(args[4], "D=http://127.0.0.1:") {
		t.Fatalf("router args %q", args)
	}
	for _, u := range []string{args[0], args[1], strings.TrimPrefix(args[4], "D=")} {
		if get(t, u+"/args") == "unreachable" {
			t.Errorf("part %s", u)
		}
	}
	if !strings.HasSuffix(args[4], ":"+args[3]) {
		t.Errorf("decode port %s is not the decode URL's %s", args[3], args[4])
	}
	engines, err := findLocalEngines(spec.Study)
	if err != nil || len(engines) != 4 {
		t.Fatalf("%d labelled processes (3 engines and the router), want 4: %v", len(engines), err)
	}
	if err := in.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, _ := findLocalEngines(spec.Study); len(left) != 0 {
		t.Errorf("%d processes of the study left after Stop", len(left))
	}
}

// TestDisaggregatedPartFails: the prefill engine runs out of memory at
// start-up; Ready names it with its own output, and Stop stops the others.
func TestDisaggregatedPartFails(t *testing.T) {
	d := &Disaggregated{
		Base:   &Process{Command: helperCommand(t, "disagg", "--port", "{port}")},
		Router: Router{Command: helperCommand(t, "router", "--port", "{port}")},
		KV:     engine.KVTransfer{PrefillConfig: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer"}`},
	}
	spec := disaggSpec(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	err = in.Ready(ctx)
	var pe *PartError
	var exit *ExitError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Part, "prefill ") || !errors.As(err, &exit) {
		t.Fatalf("Ready = %v, want a prefill part's exit", err)
	}
	if class, _ := engine.Classify(exit.Exit, false, pe.Logs); class != engine.FailOOM {
		t.Errorf("the part's logs classify as %s:\n%s", class, pe.Logs)
	}
	if err := in.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, _ := findLocalEngines(spec.Study); len(left) != 0 {
		t.Errorf("%d processes of the study left after the failed start", len(left))
	}
}

// TestDisaggregatedReap: what a run left (every part and the router) is
// found by the trial's label.
func TestDisaggregatedReap(t *testing.T) {
	d := &Disaggregated{
		Base:   &Process{Command: helperCommand(t, "serve", "--port", "{port}")},
		Router: Router{Command: helperCommand(t, "router", "--port", "{port}")},
	}
	spec := disaggSpec(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(context.Background())
	if err := in.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := d.Capabilities().Reap(ctx, spec.Study, func(Reaped) bool { return false })
	if err != nil || len(got) != 4 {
		t.Fatalf("reaped %d (%v), want 4", len(got), err)
	}
	if left, _ := findLocalEngines(spec.Study); len(left) != 0 {
		t.Errorf("%d processes left after reaping", len(left))
	}
}

// TestDisaggregatedGPUs: a trial whose GPUs do not add up is refused.
func TestDisaggregatedGPUs(t *testing.T) {
	d := &Disaggregated{Base: &Process{Command: helperCommand(t, "serve")}, Router: Router{Command: []string{"x"}}}
	spec := disaggSpec(t)
	spec.GPUs = spec.GPUs[:2]
	if _, err := d.Launch(context.Background(), spec); !errors.Is(err, ErrBadSpec) {
		t.Errorf("Launch on too few GPUs: %v", err)
	}
}

// readyFunc is an Instance whose Ready is f.
type readyFunc func(ctx context.Context) error

func (f readyFunc) Endpoint() string                { return "http://127.0.0.1:1" }
func (f readyFunc) Ready(ctx context.Context) error { return f(ctx) }
func (f readyFunc) Logs() string                    { return "" }
func (f readyFunc) Stop(context.Context) error      { return nil }

// TestDisaggregatedReadyNamesTheFailedPart: when one part fails while the
// others wait, Ready's error is that part's, never a waiting part's
// cancellation, whichever reaches the channel first (a race the trial's
// OOM test once lost: it saw "context canceled" of another part).
func TestDisaggregatedReadyNamesTheFailedPart(t *testing.T) {
	wait := readyFunc(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	oom := errors.New("CUDA out of memory")
	for i := range 300 {
		c := &composite{parts: []part{{name: "decode 0", role: engine.Decode, inst: readyFunc(func(context.Context) error { return oom })}}}
		for j := range 8 {
			c.parts = append(c.parts, part{name: fmt.Sprintf("prefill %d", j), role: engine.Prefill, inst: wait})
		}
		err := c.Ready(context.Background())
		var pe *PartError
		if !errors.As(err, &pe) || pe.Part != "decode 0" || !errors.Is(err, oom) {
			t.Fatalf("try %d: Ready = %v, want decode 0's error", i, err)
		}
	}
}

// recordingLauncher starts nothing: it keeps each spec it is asked to
// launch.
type recordingLauncher struct{ specs []Spec }

type idleInstance struct{}

func (idleInstance) Endpoint() string            { return "http://127.0.0.1:1" }
func (idleInstance) Ready(context.Context) error { return nil }
func (idleInstance) Logs() string                { return "" }
func (idleInstance) Stop(context.Context) error  { return nil }

func (r *recordingLauncher) Launch(_ context.Context, spec Spec) (Instance, error) {
	r.specs = append(r.specs, spec)
	return idleInstance{}, nil
}

func (r *recordingLauncher) Capabilities() Capabilities { return Capabilities{} }

// TestDisaggregatedPartsTakeTheirRolesSettings: each part is launched
// with its role's batch limits (prefill_max_running_requests and the
// like), rendered into its own engine flags.
func TestDisaggregatedPartsTakeTheirRolesSettings(t *testing.T) {
	base := &recordingLauncher{}
	d := &Disaggregated{Base: base, Router: Router{Command: []string{"router", "--port", "{port}", "{prefill_urls}", "{decode_urls}"}}}
	spec := disaggSpec(t)
	spec.Settings["max_running_requests"] = 32
	spec.Settings["prefill_max_running_requests"] = 4
	spec.Settings["decode_max_running_requests"] = 128
	spec.Settings["prefill_max_batched_tokens"] = 8192
	spec.Settings["decode_max_batched_tokens"] = 512
	in, err := d.Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(context.Background())
	if len(base.specs) != 3 {
		t.Fatalf("%d parts launched, want 3", len(base.specs))
	}
	for _, ps := range base.specs {
		args, err := ps.Args()
		if err != nil {
			t.Fatal(err)
		}
		line := strings.Join(args, " ")
		want := []string{"--max-num-seqs 4", "--max-num-batched-tokens 8192"}
		if strings.HasPrefix(ps.Part, "decode") {
			want = []string{"--max-num-seqs 128", "--max-num-batched-tokens 512"}
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("%s launched with %q, lacking %s", ps.Part, line, w)
			}
		}
		if strings.Contains(line, "prefill_") || strings.Contains(line, "decode_") {
			t.Errorf("%s launched with a shape setting: %q", ps.Part, line)
		}
	}
}
