package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
)

// disaggVirtualStudy is a disaggregated study on the virtual kind whose
// router is servetune's stand-in, the prefill and decode engines with
// batch limits of their own.
const disaggVirtualStudy = `name: recipe
model: meta-llama/Llama-3.1-8B-Instruct
engine: ENGINE
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space:
  disaggregated: true
  tensor_parallel: 1
  max_running_requests: 32
  prefill_max_running_requests: 8
  decode_max_running_requests: 64
disaggregation:
  router: ["{servetune}", sim, router, --host, "{host}", --port, "{port}",
           --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}",
           --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]
workload:
  dataset: {kind: random, input: 1024, output: 32}
  load: {concurrency: [4]}
  requests_per_level: 24
  warmup: 2
slo: {ttft_p99_ms: 30000}
tuner: {sampler: grid, trials: 1, seed: 1, confirm: false}
`

// invocation is one command a pasted recipe ran: its program, the
// environment the recipe gave it, and its arguments.
type invocation struct {
	prog, gpus, sideChannel string
	args                    []string
}

// pasteRecipe runs a recipe's lines in bash, every program it names a
// stub on PATH that records how it was run, and returns the runs.
func pasteRecipe(t *testing.T, lines []string, progs ...string) []invocation {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin, rec := filepath.Join(dir, "bin"), filepath.Join(dir, "rec")
	for _, d := range []string{bin, rec} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub := "#!" + bash + "\nprintf '%s\\0' \"${0##*/}\" \"${CUDA_VISIBLE_DEVICES-}\" \"${VLLM_NIXL_SIDE_CHANNEL_PORT-}\" \"$@\" > \"$REC/$$.$RANDOM\"\n"
	for _, p := range progs {
		if err := os.WriteFile(filepath.Join(bin, p), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "set -e\n" + strings.Join(lines, "\n") + "\nwait\n"
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	cmd.Env = []string{"PATH=" + bin, "REC=" + rec}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the recipe in bash: %v\n%s\n%s", err, out, script)
	}
	files, err := os.ReadDir(rec)
	if err != nil {
		t.Fatal(err)
	}
	var runs []invocation
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(rec, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		runs = append(runs, invocation{prog: w[0], gpus: w[1], sideChannel: w[2], args: w[3:]})
	}
	return runs
}

// flagValue is the value after flag in args, "" without it.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestDisaggRecipePastes: a disaggregated recommendation of a study that
// measured servetune's stand-in router, pasted into a shell, starts each
// engine on its own GPU with its role's batch limits and the engine's
// packaged router (its install line printed) in front of them, that
// router's argv as its documentation gives its flags, one --prefill and
// --decode per engine; the Kubernetes router runs that router in an
// image that has it.
func TestDisaggRecipePastes(t *testing.T) {
	for _, e := range []engine.Engine{engine.VLLM, engine.SGLang} {
		t.Run(string(e), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			if code, _, errs := runCLI(t, "tune", writeSpec(t, strings.Replace(disaggVirtualStudy, "ENGINE", string(e), 1)), "--db", db); code != exitOK {
				t.Fatalf("tune: exit %d: %s", code, errs)
			}
			code, out, errs := runCLI(t, "recommend", "recipe", "--db", db)
			if code != exitOK {
				t.Fatalf("recommend: %s", errs)
			}
			_, recipe, ok := strings.Cut(out, "# disaggregated on one host:")
			if !ok {
				t.Fatalf("no one-host recipe:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(recipe), "\n")[1:]
			router, _ := engine.RouterFor(e, engine.Version{}, engine.KVTransfer{})
			if !slices.Contains(lines, "# "+router.Install()) {
				t.Errorf("no install line %q:\n%s", router.Install(), recipe)
			}
			runs := pasteRecipe(t, lines, "vllm", "vllm-router", "python3")
			if len(runs) != 3 {
				t.Fatalf("%d commands ran, want 2 engines and the router: %+v", len(runs), runs)
			}
			seqs := map[engine.Engine]string{engine.VLLM: "--max-num-seqs", engine.SGLang: "--max-running-requests"}[e]
			ports := map[string]string{}
			var routerArgv []string
			for _, r := range runs {
				argv := append([]string{r.prog}, r.args...)
				switch {
				case e == engine.VLLM && r.prog == "vllm", e == engine.SGLang && slices.Contains(r.args, "sglang.launch_server"):
					role := "decode" // the recipe's prefill engine comes first, on the first port
					if flagValue(r.args, "--port") == "8100" {
						role = "prefill"
					}
					if e == engine.SGLang && flagValue(r.args, "--disaggregation-mode") != role {
						t.Errorf("%s engine %v", role, argv)
					}
					want := map[string]string{"prefill": "8", "decode": "64"}[role]
					if got := flagValue(r.args, seqs); got != want {
						t.Errorf("%s engine %v: %s %q, want %s", role, argv, seqs, got, want)
					}
					if r.gpus != map[string]string{"prefill": "0", "decode": "1"}[role] {
						t.Errorf("%s engine on GPUs %q", role, r.gpus)
					}
					if e == engine.VLLM && r.sideChannel == "" {
						t.Errorf("%s engine without its NIXL side-channel port", role)
					}
					ports[role] = flagValue(r.args, "--port")
				default:
					routerArgv = argv
				}
			}
			if err := router.CheckArgv(routerArgv); err != nil {
				t.Fatalf("the router as run: %v", err)
			}
			for role, flag := range map[string]string{"prefill": "--prefill", "decode": "--decode"} {
				if got, want := flagValue(routerArgv, flag), "http://127.0.0.1:"+ports[role]; got != want {
					t.Errorf("router %s %q, want the %s engine's %s", flag, got, role, want)
				}
			}
			if got := flagValue(routerArgv, "--port"); got != "8000" {
				t.Errorf("router on port %q", got)
			}

			code, k8s, errs := runCLI(t, "recommend", "recipe", "--db", db, "--format", "k8s")
			if code != exitOK {
				t.Fatalf("--format k8s: %s", errs)
			}
			var found bool
			for _, doc := range manifestDocs(k8s) {
				var d appsv1.Deployment
				if yaml.Unmarshal(doc, &d) != nil || d.Kind != "Deployment" || !strings.HasSuffix(d.Name, "-router") {
					continue
				}
				found = true
				c := d.Spec.Template.Spec.Containers[0]
				if c.Image != router.Image {
					t.Errorf("router image %s, want %s", c.Image, router.Image)
				}
				if err := router.CheckArgv(c.Command); err != nil {
					t.Errorf("router container: %v", err)
				}
				s := kube.Serve{Engine: e, Model: "meta-llama/Llama-3.1-8B-Instruct"}
				if got, want := flagValue(c.Command, "--prefill"), kube.PartURL(s, engine.Prefill); got != want {
					t.Errorf("router container --prefill %q, want %s", got, want)
				}
			}
			if !found {
				t.Fatalf("no router Deployment:\n%s", k8s)
			}
			file := filepath.Join(t.TempDir(), "disagg.yaml")
			if err := os.WriteFile(file, []byte(k8s), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Run("server dry run", func(t *testing.T) { serverDryRun(t, file) })
		})
	}
}
