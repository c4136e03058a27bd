package archtest

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rule is one claim of docs/architecture.md about the code, as a check.
type rule struct {
	name  string // the subtest's name: TestRules/NAME
	claim string // the claim, in docs/architecture.md's words
	// check returns what breaks the claim, each naming the file (and line
	// where there is one) and the import or identifier that broke it.
	check func(*tree) []string
	// bad are deliberate violations: the check must catch each.
	bad []breach
}

// breach is a deliberate violation of a rule: a file added to the tree, or
// put in the place of one, and what the check's message names beside the
// file's path.
type breach struct {
	path, src string
	names     string
}

// rules is every claim of docs/architecture.md that is a rule about the
// code.
var rules = []rule{
	// The package table and the documents' pointers.
	{name: "package-table",
		claim: "every package is a row of the package table, once, and a package imports only those below it",
		check: packageTable,
		bad: []breach{
			{"internal/term/bad.go", "package term\n\nimport _ \"github.com/servetune/servetune/internal/load/measure\"\n", "internal/load/measure"},
		}},
	{name: "comment-cross-references",
		claim: "code comments point here: every docs/ file and section a comment names exists",
		check: crossReferences,
		bad: []breach{
			{"internal/term/bad.go", "// Package term: see docs/architecture.md (No Such Section).\npackage term\n", "No Such Section"},
			{"internal/term/bad_test.go", "package term\n\n// docs/nothing.md\nvar x int\n", "docs/nothing.md"},
		}},
	{name: "failure-classes-listed",
		claim: "failures are counted by class (measure.ErrorClasses, all of them, in report order)",
		check: failureClasses,
		bad: []breach{
			{"docs/architecture.md", "Failures are counted by class (`connect timeout`) and excluded", "lists failure classes"},
		}},

	// What imports, and links, what.
	{name: "launcher-links-no-load-or-simulator",
		claim: "launcher links neither the load generator (internal/load/bench) nor the simulator",
		check: layer{from: []string{"launcher"}, links: true, not: []string{"internal/load/bench", "internal/model/...", "launcher/simulated"}}.check,
		bad: []breach{
			{"launcher/bad.go", "package launcher\n\nimport _ \"github.com/servetune/servetune/internal/model/sim\"\n", "internal/model/sim"},
			{"internal/serving/engine/bad.go", "package engine\n\nimport _ \"github.com/servetune/servetune/internal/load/bench\"\n", "internal/load/bench"},
		}},
	{name: "real-kinds-link-no-simulator",
		claim: "the real kinds (launcher/docker, launcher/slurm, launcher/kubernetes) link no simulator: what they share with the simulated engine's kinds is launcher/simenv's",
		check: layer{from: []string{"launcher/docker", "launcher/slurm", "launcher/kubernetes"}, links: true, not: []string{"internal/model/...", "launcher/simulated"}}.check,
		bad: []breach{
			{"launcher/slurm/bad.go", "package slurm\n\nimport _ \"github.com/servetune/servetune/launcher/simulated\"\n", "launcher/simulated"},
		}},
	{name: "simenv-reads-catalog",
		claim: "launcher/simenv reads the catalog, not the simulator",
		check: layer{from: []string{"launcher/simenv"}, links: true, not: []string{"internal/model/...", "launcher/simulated"}}.check,
		bad: []breach{
			{"launcher/simenv/bad.go", "package simenv\n\nimport _ \"github.com/servetune/servetune/internal/model/sim\"\n", "internal/model/sim"},
		}},
	{name: "docker-sdk-in-launcher-docker",
		claim: "only launcher/docker imports the Docker SDK (and internal/testengine, the tests' helper)",
		check: layer{from: []string{"..."}, except: []string{"launcher/docker", "internal/testengine/..."}, not: []string{"github.com/docker/docker/..."}}.check,
		bad: []breach{
			{"trial/bad.go", "package trial\n\nimport _ \"github.com/docker/docker/client\"\n", "github.com/docker/docker/client"},
		}},
	{name: "kinds-imports-real-kinds",
		claim: "only launcher/kinds imports launcher/docker, launcher/slurm and launcher/kubernetes: nothing in tuner or cmd names a real kind",
		check: layer{from: []string{"..."}, except: []string{"launcher/kinds"}, not: []string{"launcher/docker", "launcher/slurm", "launcher/kubernetes"}}.check,
		bad: []breach{
			{"tuner/bad.go", "package tuner\n\nimport _ \"github.com/servetune/servetune/launcher/docker\"\n", "launcher/docker"},
		}},
	{name: "cmd-imports-kinds",
		claim: "only cmd/servetune imports launcher/kinds",
		check: layer{from: []string{"..."}, except: []string{"cmd/servetune"}, not: []string{"launcher/kinds"}}.check,
		bad: []breach{
			{"tuner/bad.go", "package tuner\n\nimport _ \"github.com/servetune/servetune/launcher/kinds\"\n", "launcher/kinds"},
		}},
	{name: "kinds-imports-every-kind",
		claim: "a launcher kind is a package whose init calls launcher.Register, and one import line in launcher/kinds/kinds.go",
		check: kindsImportsEveryKind,
		bad: []breach{
			{"launcher/simenv/bad.go", "package simenv\n\nimport \"github.com/servetune/servetune/launcher\"\n\nfunc init() { launcher.Register(launcher.Kind{Name: \"x\"}) }\n", "launcher/simenv"},
		}},
	{name: "test-packages-tests-only",
		claim: "only tests import the tests' packages: internal/testspec (the specs tests share), internal/testengine, internal/hostile, internal/browser",
		check: layer{from: []string{"..."}, not: []string{"internal/testspec", "internal/testengine/...", "internal/hostile", "internal/browser"}}.check,
		bad: []breach{
			{"cmd/servetune/bad.go", "package main\n\nimport _ \"github.com/servetune/servetune/internal/testspec\"\n", "internal/testspec"},
			{"internal/serving/engine/bad.go", "package engine\n\nimport _ \"github.com/servetune/servetune/internal/hostile\"\n", "internal/hostile"},
		}},
	{name: "archtest-tests-only",
		claim: "internal/archtest holds tests only",
		check: testsOnly,
		bad: []breach{
			{"internal/archtest/bad.go", "package archtest\n\nfunc Helper() {}\n", "func Helper"},
		}},
	{name: "no-testdata-shipped",
		claim: "test data stays out of what ships: no package but internal/testspec embeds a testdata/ file",
		check: noTestdataShipped,
		bad: []breach{
			{"store/bad.go", "package store\n\nimport _ \"embed\"\n\n//go:embed testdata/x\nvar x string\n", "go:embed testdata/x"},
		}},
	{name: "tuner-links-no-simulator",
		claim: "tuner links neither the simulator nor the calibration, nor the Docker SDK: the samplers that use them (tuner/guided) register themselves, and the memory precheck (tuner/memory) is handed in",
		check: layer{from: []string{"tuner"}, links: true, not: []string{"internal/model/...", "launcher/simulated", "launcher/docker", "github.com/docker/docker/...", "tuner/guided", "tuner/memory"}}.check,
		bad: []breach{
			{"tuner/bad.go", "package tuner\n\nimport _ \"github.com/servetune/servetune/internal/model/calibrate\"\n", "internal/model/calibrate"},
		}},
	{name: "tuner-size",
		claim: "tuner stays under 2,500 lines: a part with its own concern is a subpackage",
		check: under{"tuner", 2500}.check,
		bad: []breach{
			{"tuner/bad.go", "package tuner\n" + strings.Repeat("//\n", 2500), "2500"},
		}},
	{name: "spec-runs-nothing",
		claim: "the spec, tuner/spec, names no launcher type and calls no runner",
		check: layer{from: []string{"tuner/spec"}, links: true, not: []string{"launcher/...", "trial", "tuner", "tuner/sampler", "tuner/guided", "internal/model/..."}}.check,
		bad: []breach{
			{"tuner/spec/bad.go", "package spec\n\nimport _ \"github.com/servetune/servetune/launcher\"\n", "launcher"},
		}},
	{name: "spec-same-whatever-links",
		claim: "a spec parses the same whatever the program links: nothing adds to tuner/spec as a program starts",
		check: specSameWhateverLinks,
		bad: []breach{
			{"tuner/spec/bad.go", "package spec\n\nfunc init() {}\n", "func init"},
			{"tuner/guided/bad.go", "package guided\n\nimport \"github.com/servetune/servetune/tuner/spec\"\n\nfunc init() { spec.DefaultConfirm.Top = 1 }\n", "spec.DefaultConfirm"},
		}},
	{name: "recommend-reads-terms",
		claim: "ranking is tuner/recommend, from recommend.Terms rather than a spec: it links no tuner/spec",
		check: layer{from: []string{"tuner/recommend"}, links: true, not: []string{"tuner/spec"}}.check,
		bad: []breach{
			{"tuner/recommend/bad.go", "package recommend\n\nimport _ \"github.com/servetune/servetune/tuner/spec\"\n", "tuner/spec"},
		}},
	{name: "readers-link-no-runner",
		claim: "internal/present/report and internal/present/ui link no sampler, simulator or launcher package",
		check: layer{from: []string{"internal/present/report", "internal/present/ui"}, links: true,
			not: []string{"github.com/c-bata/goptuna/...", "tuner", "tuner/sampler", "tuner/guided", "tuner/memory", "internal/model/...", "launcher/..."}}.check,
		bad: []breach{
			{"internal/present/ui/bad.go", "package ui\n\nimport _ \"github.com/servetune/servetune/tuner/sampler\"\n", "tuner/sampler"},
		}},
	{name: "readers-write-nothing",
		claim: "the report and the dashboard read only what the store holds; neither writes",
		check: readersWriteNothing,
		bad: []breach{
			{"internal/present/ui/bad.go", "package ui\n\nimport (\n\t\"context\"\n\n\t\"github.com/servetune/servetune/store\"\n)\n\nfunc drop(db *store.Store) error { return db.DeleteStudy(context.Background(), \"x\") }\n", "DeleteStudy"},
		}},
	{name: "internal-imports-no-runner",
		claim: "nothing under internal/ imports the packages that run a study (tuner and its runners)",
		check: layer{from: []string{"internal/..."}, not: []string{"tuner", "tuner/sampler", "tuner/guided", "tuner/memory", "tuner/whatif", "tuner/samplerbench"}}.check,
		bad: []breach{
			{"internal/fleet/bad.go", "package fleet\n\nimport _ \"github.com/servetune/servetune/tuner/memory\"\n", "tuner/memory"},
		}},

	// Each third-party library with one home.
	{name: "sqlite-in-store",
		claim: "store is the SQLite database: only it imports the driver",
		check: layer{from: []string{"..."}, except: []string{"store"}, not: []string{"github.com/mattn/go-sqlite3"}}.check,
		bad: []breach{
			{"tuner/bad.go", "package tuner\n\nimport _ \"github.com/mattn/go-sqlite3\"\n", "go-sqlite3"},
		}},
	{name: "nvml-in-gpu",
		claim: "NVML telemetry is internal/load/gpu's: only it imports go-nvml",
		check: layer{from: []string{"..."}, except: []string{"internal/load/gpu"}, not: []string{"github.com/NVIDIA/go-nvml/..."}}.check,
		bad: []breach{
			{"cmd/servetune/bad.go", "package main\n\nimport _ \"github.com/NVIDIA/go-nvml/pkg/nvml\"\n", "go-nvml"},
		}},
	{name: "expfmt-in-scrape",
		claim: "reading an engine's Prometheus /metrics (expfmt) is internal/load/scrape's",
		check: layer{from: []string{"..."}, except: []string{"internal/load/scrape"}, not: []string{"github.com/prometheus/common/expfmt"}}.check,
		bad: []breach{
			{"internal/fleet/replay/bad.go", "package replay\n\nimport _ \"github.com/prometheus/common/expfmt\"\n", "expfmt"},
		}},
	{name: "plot-in-report",
		claim: "a chart is a newChart in internal/present/report (gonum/plot, inline SVG); the dashboard reuses the report's",
		check: layer{from: []string{"..."}, except: []string{"internal/present/report"}, not: []string{"gonum.org/v1/plot/..."}}.check,
		bad: []breach{
			{"internal/present/ui/bad.go", "package ui\n\nimport _ \"gonum.org/v1/plot\"\n", "gonum.org/v1/plot"},
		}},
	{name: "chromedp-in-browser",
		claim: "headless Chromium (chromedp) is internal/browser's",
		check: layer{from: []string{"..."}, except: []string{"internal/browser"}, not: []string{"github.com/chromedp/..."}}.check,
		bad: []breach{
			{"internal/present/ui/bad.go", "package ui\n\nimport _ \"github.com/chromedp/chromedp\"\n", "chromedp"},
		}},
	{name: "client-go-in-kubernetes",
		claim: "the kubernetes kind reaches a cluster with client-go: only launcher/kubernetes imports it (and internal/testengine, the tests' helper)",
		check: layer{from: []string{"..."}, except: []string{"launcher/kubernetes", "internal/testengine/..."}, not: []string{"k8s.io/client-go/..."}}.check,
		bad: []breach{
			{"internal/serving/kube/bad.go", "package kube\n\nimport _ \"k8s.io/client-go/kubernetes\"\n", "k8s.io/client-go/kubernetes"},
		}},
	{name: "manifests-in-kube",
		claim: "manifests are internal/serving/kube's, written with sigs.k8s.io/yaml (LeaderWorkerSet types from sigs.k8s.io/lws)",
		check: layer{from: []string{"..."}, except: []string{"internal/serving/kube"}, not: []string{"sigs.k8s.io/yaml", "sigs.k8s.io/lws/..."}}.check,
		bad: []breach{
			{"launcher/kubernetes/bad.go", "package kubernetes\n\nimport _ \"sigs.k8s.io/yaml\"\n", "sigs.k8s.io/yaml"},
		}},

	// What is spelled, defined or done in one place.
	{name: "flags-spelled-once",
		claim: "an engine flag is one row of table in internal/serving/engine/flags.go: its spelling appears in no other non-test file, comments included",
		check: flagsSpelledOnce,
		bad: []breach{
			{"launcher/slurm/bad.go", "// Package slurm passes --max-num-seqs.\npackage slurm\n", "--max-num-seqs"},
		}},
	{name: "shell-quoted-once",
		claim: "internal/serving/engine holds the one shell quoter (engine.ShellQuote, in command.go)",
		check: shellQuotedOnce,
		bad: []breach{
			{"cmd/servetune/bad.go", "package main\n\nfunc shellQuote(s string) string { return s }\n", "func shellQuote("},
			{"launcher/slurm/bad.go", "package slurm\n\nvar q = `'\\''`\n", "'\\''"},
		}},
	{name: "failure-classes-once",
		claim: "the failure classes and the one classifier are internal/serving/engine's (failure.go: Failures, Classify)",
		check: failureClassesOnce,
		bad: []breach{
			{"trial/bad.go", "package trial\n\nimport \"github.com/servetune/servetune/internal/serving/engine\"\n\nvar slow = engine.Failure(\"slow\")\n", `engine.Failure("slow")`},
		}},
	{name: "metric-names-once",
		claim: "the metric table, internal/load/measure/metric.go, is the source of every metric's name: no other file switches on one or lists them",
		check: metricNamesOnce,
		bad: []breach{
			{"tuner/recommend/bad.go", "package recommend\n\nfunc unit(m string) string {\n\tswitch m {\n\tcase \"ttft_p99\":\n\t\treturn \"ms\"\n\t}\n\treturn \"\"\n}\n", `case "ttft_p99"`},
			{"internal/present/report/bad.go", "package report\n\nvar series = []string{\"ttft\", \"tpot\", \"itl\"}\n", "3 latency series"},
		}},
	{name: "statistics-once",
		claim: "the statistics are internal/load/measure's alone (stats.go): median, percentiles, quartiles, bootstrap, Student's and Welch's intervals",
		check: statisticsOnce,
		bad: []breach{
			{"internal/fleet/bad.go", "package fleet\n\nfunc median(xs []float64) float64 { return xs[len(xs)/2] }\n", "func median"},
			{"internal/present/report/bad.go", "package report\n\nfunc mid(xs []float64) float64 { return xs[len(xs)/2] }\n", "xs[len(xs)/2]"},
		}},
	{name: "redaction-marker-once",
		claim: "internal/redact is the one home of redaction: `[REDACTED]` (redact.Redacted) the one marker",
		check: redactionMarkerOnce,
		bad: []breach{
			{"internal/load/bench/bad.go", "package bench\n\nconst hidden = \"<redacted>\"\n", "<redacted>"},
			{"store/bad.go", "package store\n\nconst hidden = \"[REDACTED]\"\n", "[REDACTED]"},
			{"trial/bad.go", "package trial\n\nimport \"github.com/servetune/servetune/internal/redact\"\n\nconst hidden = redact.Redacted\n", "const hidden = redact.Redacted"},
		}},
	{name: "serve-sequence-once",
		claim: "internal/httpserve holds the one listen, ready, serve-until-cancelled sequence of an HTTP server and the one loopback test",
		check: serveSequenceOnce,
		bad: []breach{
			{"launcher/docker/bad.go", "package docker\n\nimport \"net\"\n\nfunc local(ip net.IP) bool { return ip.IsLoopback() }\n", ".IsLoopback()"},
			{"internal/model/sim/bad.go", "package sim\n\nimport (\n\t\"context\"\n\t\"net/http\"\n)\n\nfunc stop(s *http.Server, ctx context.Context) error { return s.Shutdown(ctx) }\n", ".Shutdown(ctx)"},
		}},
	{name: "label-codec-once",
		claim: "launcher.Label is the one codec of a container's labels, a Slurm job's comment and a process's environment",
		check: labelCodecOnce,
		bad: []breach{
			{"launcher/slurm/bad.go", "package slurm\n\nconst owner = \"servetune.io/owner\"\n", `"servetune.io/`},
			{"launcher/bad.go", "package launcher\n\nconst study = \"SERVETUNE_STUDY\"\n", `"SERVETUNE_STUDY"`},
		}},
	{name: "target-once",
		claim: "openai.Target is the one description of an OpenAI-compatible server a request goes to, used by the benchmark and the quality gate",
		check: targetOnce,
		bad: []breach{
			{"internal/load/quality/bad.go", "package quality\n\ntype server struct {\n\tBaseURL string\n\tAPIKey  string\n}\n", "BaseURL"},
		}},
	{name: "yaml-writer-once",
		claim: "internal/yamlenc is the one yaml.v3 writer",
		check: calls{except: []string{"internal/yamlenc"}, ip: "gopkg.in/yaml.v3", names: []string{"Marshal", "NewEncoder"}, why: "a second yaml.v3 writer; use yamlenc.Encode"}.check,
		bad: []breach{
			{"tuner/recommend/bad.go", "package recommend\n\nimport \"gopkg.in/yaml.v3\"\n\nvar b, _ = yaml.Marshal(1)\n", "yaml.Marshal"},
		}},
	{name: "registry-once",
		claim: "internal/registry is the one table of named kinds packages fill in their init functions (launcher kinds, sampler kinds)",
		check: registryOnce,
		bad: []breach{
			{"internal/fleet/bad.go", "package fleet\n\nvar routers = map[string]int{}\n\nfunc Register(name string) { routers[name] = 1 }\n", "func Register"},
		}},
	{name: "capabilities-one-value",
		claim: "callers read a launcher's Capabilities value, never assert an interface",
		check: capabilitiesOneValue,
		bad: []breach{
			{"trial/bad_test.go", "package trial\n\nfunc f(x any) bool { _, ok := x.(interface{ Reap() }); return ok }\n", "Reap"},
			{"tuner/bad.go", "package tuner\n\ntype reaper interface{ Preflight() }\n\nfunc f(x any) {\n\tswitch x.(type) {\n\tcase reaper:\n\t}\n}\n", "Preflight"},
		}},
	{name: "cmd-writes-through-output",
		claim: "cmd/servetune writes the files a command produces through one writer (output.go)",
		check: calls{in: []string{"cmd/servetune"}, skip: "cmd/servetune/output.go", ip: "os",
			names: []string{"Create", "CreateTemp", "WriteFile", "OpenFile", "Rename"}, why: "a file written beside output.go's writer; use writeOutput"}.check,
		bad: []breach{
			{"cmd/servetune/bad.go", "package main\n\nimport \"os\"\n\nfunc save(b []byte) error { return os.WriteFile(\"x\", b, 0o600) }\n", "os.WriteFile"},
		}},
	{name: "samplers-seeded",
		claim: "a sampler draws from its own seeded *rand.Rand, never math/rand's global source",
		check: seededSamplers,
		bad: []breach{
			{"tuner/sampler/bad.go", "package sampler\n\nimport \"math/rand/v2\"\n\nvar x = rand.Float64()\n", "rand.Float64"},
		}},

	// How tests wait.
	{name: "test-sleeps-said",
		claim: "tests synchronise on events, not on sleeps: a time.Sleep in a test runs on a synctest bubble's clock, or is a delay the test is about, and a comment says so",
		check: testSleepsSaid,
		bad: []breach{
			{"trial/bad_test.go", "package trial\n\nimport \"time\"\n\nfunc settle() {\n\ttime.Sleep(time.Second)\n}\n", "time.Sleep"},
		}},
}

// TestRules checks every rule of the table, each a subtest, against the
// module, and against each of its deliberate violations, which it must
// catch, naming the file.
func TestRules(t *testing.T) {
	tr := moduleTree(t)
	listed := rulesListed(tr.docs["docs/architecture.md"])
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.name] {
			t.Errorf("two rules named %s", r.name)
		}
		seen[r.name] = true
		if listed[r.name] == 0 {
			t.Errorf("docs/architecture.md's Rules section does not name the rule %s", r.name)
		}
		t.Run(r.name, func(t *testing.T) {
			for _, msg := range r.check(tr) {
				t.Errorf("%s\n\tbreaks: %s", msg, r.claim)
			}
			if len(r.bad) == 0 {
				t.Error("the rule has no deliberate violation to catch")
			}
			for _, b := range r.bad {
				bt, err := tr.with(b.path, b.src)
				if err != nil {
					t.Fatal(err)
				}
				msgs := r.check(bt)
				i := slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, b.path) && strings.Contains(m, b.names) })
				if i < 0 {
					t.Errorf("a violation in %s (%s) was not caught; the check said %q", b.path, b.names, msgs)
					continue
				}
				t.Logf("caught: %s", msgs[i])
			}
		})
	}
	for name, line := range listed {
		if !seen[name] {
			t.Errorf("docs/architecture.md:%d names the rule %s, which is no row of internal/archtest's rules", line, name)
		}
	}
}

// ruleName is a row's name as the Rules section writes it: `words-like-this`.
var ruleName = regexp.MustCompile("`([a-z0-9]+(?:-[a-z0-9]+)+)`")

// rulesListed are the rule names the Rules section of docs/architecture.md
// gives, each with its line.
func rulesListed(doc []byte) map[string]int {
	out := map[string]int{}
	in := false
	for i, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## Rules"
			continue
		}
		if in {
			for _, m := range ruleName.FindAllStringSubmatch(line, -1) {
				out[m[1]] = i + 1
			}
		}
	}
	return out
}
