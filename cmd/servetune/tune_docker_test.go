package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

// requireSimImage makes sure the servetune-sim:dev image is present,
// built once per test binary by the script `make sim-image` runs; without
// Docker the test skips (fails under SERVETUNE_REQUIRE_DOCKER=1).
func requireSimImage(t *testing.T) {
	t.Helper()
	testengine.Image(t)
}

// TestTuneDockerSim runs a study whose trials are containers of the
// simulated engine's image: the out-of-memory one fails with the engine's
// message, the other is measured, and no container is left behind.
func TestTuneDockerSim(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	requireSimImage(t)
	name := fmt.Sprintf("dockertest-%d", os.Getpid())
	src := strings.NewReplacer(
		"name: clitest", "name: "+name,
		"  kind: sim\n", "  kind: docker\n  image: servetune-sim:dev\n",
		"REQS", "8", "TRIALS", "2",
		"max_running_requests: [8, 32]", "max_running_requests: 16",
	).Replace(tuneSpec)
	spec := writeSpec(t, src)
	db := filepath.Join(t.TempDir(), "t.db")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"tune", spec, "--db", db}, &out, &errb); code != exitOK {
		t.Fatalf("tune: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var tj bytes.Buffer
	if code := run(context.Background(), []string{"trials", name, "--db", db, "--json", "-"}, &tj, &errb); code != exitOK {
		t.Fatalf("trials: %s", errb.String())
	}
	s := tj.String()
	if !strings.Contains(s, `"failure": "oom"`) || !strings.Contains(s, `"status": "ok"`) || !strings.Contains(s, "No available memory") {
		t.Errorf("trials:\n%s", s)
	}
	left, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+launcher.LabelStudy+"="+name).Output()
	if err != nil || len(bytes.TrimSpace(left)) != 0 {
		t.Errorf("containers left behind: %q (%v)", left, err)
	}
}

// testCommand is exec.Command killed before the test's deadline (-timeout
// less a margin for cleanups): a command that hangs fails its test, and
// the t.Cleanup that removes the test's containers or jobs by its own
// label still runs, which a package timeout would not allow.
func testCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	d, ok := t.Deadline()
	if !ok {
		return exec.Command(name, args...)
	}
	margin := min(2*time.Minute, time.Until(d)/4)
	ctx, cancel := context.WithDeadline(context.Background(), d.Add(-margin))
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, name, args...)
}

// dockerSimStudy copies examples/docker-sim.yaml under a study name of this
// test's own (the containers' label), with edits as old/new pairs.
func dockerSimStudy(t *testing.T, edits ...string) (spec, name string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "docker-sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("dockertest-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), os.Getpid())
	s := strings.Replace(string(src), "name: docker-sim\n", "name: "+name+"\n", 1)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("docker-sim.yaml lacks %q", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return writeSpec(t, s), name
}

// containersOf lists the containers, in any state, labelled with study.
func containersOf(t *testing.T, study string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+launcher.LabelStudy+"="+study).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// removeContainersOf is a test's last resort, so a failure leaves no
// container behind on the developer's machine.
func removeContainersOf(t *testing.T, study string) {
	t.Cleanup(func() {
		if ids := containersOf(t, study); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
}

func trialsOf(t *testing.T, bin, db, study string) trialsDoc {
	t.Helper()
	out, err := exec.Command(bin, "trials", study, "--db", db, "--json", "-").Output()
	if err != nil {
		t.Fatalf("trials --json: %v", err)
	}
	var doc trialsDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("trials --json: %v\n%s", err, out)
	}
	return doc
}

func countStatus(doc trialsDoc, status string) int {
	n := 0
	for _, tr := range doc.Trials {
		if tr.Status == status {
			n++
		}
	}
	return n
}

// TestTuneDockerExample runs examples/docker-sim.yaml as shipped (only its
// name changed): at least 3 trials ok, the out-of-memory ones stored with
// the engine's message, no container left.
func TestTuneDockerExample(t *testing.T) {
	requireSimImage(t)
	bin := buildServetune(t)
	t.Parallel()
	spec, name := dockerSimStudy(t)
	removeContainersOf(t, name)
	db := filepath.Join(t.TempDir(), "t.db")
	out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) < 4 || countStatus(doc, "ok") < 3 {
		t.Errorf("%d trials, %d ok; want >= 4 and >= 3:\n%s", len(doc.Trials), countStatus(doc, "ok"), out)
	}
	for _, tr := range doc.Trials {
		if tr.Status == "failed" && (tr.Failure != "oom" || !strings.Contains(tr.FailureMsg, "No available memory")) {
			t.Errorf("trial %d: %s/%s %q", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		}
	}
	if left := containersOf(t, name); len(left) != 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// quickDockerStudy is the example with one level (concurrency 16, its 96
// requests) for the kill tests: the kill lands at a quarter of it, with
// three times that still to run (the last of two 48-request levels left
// too little on a loaded machine).
func quickDockerStudy(t *testing.T) (spec, name string) {
	return dockerSimStudy(t, "load: {concurrency: [4, 16]}", "load: {concurrency: [16]}")
}

// startTuneUntilInFlight starts `tune` and returns once a healthy trial is
// a quarter into its level at concurrency 16 (its container runs for sure), with that
// trial's number. The rest of stderr arrives on rest once tune exits.
func startTuneUntilInFlight(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, inFlight int, rest chan string) {
	t.Helper()
	cmd = testCommand(t, bin, append([]string{"tune"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	level2 := regexp.MustCompile(`^trial (\d+) concurrency=16 `)
	sc := bufio.NewScanner(stderr)
	var head strings.Builder
	inFlight = -1
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if m := level2.FindStringSubmatch(sc.Text()); m != nil {
			inFlight, _ = strconv.Atoi(m[1])
			break
		}
	}
	rest = make(chan string, 1)
	go func() { // owned by the caller, who reads rest
		b, _ := io.ReadAll(stderr)
		rest <- string(b)
	}()
	if inFlight < 0 {
		tail := <-rest
		_ = cmd.Wait()
		t.Fatalf("the study ended before a trial was in flight:\n%s%s", head.String(), tail)
	}
	return cmd, inFlight, rest
}

// TestTuneDockerInterrupt sends SIGINT (Ctrl-C) or SIGTERM while a trial
// is measured: tune exits 1 promptly, the finished trials are kept, the one
// in flight is stored as interrupted, and its container is gone.
func TestTuneDockerInterrupt(t *testing.T) {
	requireSimImage(t)
	bin := buildServetune(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			// One level long enough that the trial in flight cannot finish
			// before the signal lands (the signal goes at a quarter of it):
			// with two short levels it sometimes did on a loaded machine,
			// and was stored ok.
			spec, name := dockerSimStudy(t, "requests_per_level: 96", "requests_per_level: 2000",
				"load: {concurrency: [4, 16]}", "load: {concurrency: [16]}")
			removeContainersOf(t, name)
			db := filepath.Join(t.TempDir(), "t.db")
			cmd, inFlight, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
			if len(containersOf(t, name)) == 0 {
				t.Error("no container while a trial was measured")
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// All of stderr first: Wait closes the pipe, cutting what is unread.
			stderr := <-rest
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(stderr, "interrupted: stopping the load") ||
				!strings.Contains(stderr, "--resume") {
				t.Errorf("tune after %v: %v\n%s", sig, err, stderr)
			}
			if left := containersOf(t, name); len(left) != 0 {
				t.Errorf("containers left after %v: %v", sig, left)
			}
			doc := trialsOf(t, bin, db, name)
			if len(doc.Trials) != inFlight+1 {
				t.Fatalf("%d trials stored, want %d (0..%d)", len(doc.Trials), inFlight+1, inFlight)
			}
			for _, tr := range doc.Trials {
				want := tr.Status == "ok" || tr.Status == "failed" && tr.Failure == "oom"
				if tr.Number == inFlight {
					want = tr.Status == "interrupted"
				}
				if !want {
					t.Errorf("trial %d: %s/%s (in flight: %d)", tr.Number, tr.Status, tr.Failure, inFlight)
				}
			}
		})
	}
}

// killInFlight SIGKILLs tune while a trial is measured: no cleanup runs,
// so the trial's container stays.
func killInFlight(t *testing.T, bin, spec, db, name string) int {
	t.Helper()
	cmd, inFlight, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-rest
	_ = cmd.Wait()
	if len(containersOf(t, name)) == 0 {
		t.Fatal("SIGKILL left no container: nothing to test")
	}
	return inFlight
}

// TestTuneDockerKillCleanup: after SIGKILL, `servetune cleanup --study`
// removes the leftover container.
func TestTuneDockerKillCleanup(t *testing.T) {
	requireSimImage(t)
	bin := buildServetune(t)
	t.Parallel()
	spec, name := quickDockerStudy(t)
	removeContainersOf(t, name)
	db := filepath.Join(t.TempDir(), "t.db")
	killInFlight(t, bin, spec, db, name)
	out, err := testCommand(t, bin, "cleanup", "--study", name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed ") {
		t.Errorf("cleanup: %v\n%s", err, out)
	}
	if left := containersOf(t, name); len(left) != 0 {
		t.Errorf("containers left after cleanup: %v", left)
	}
}

// TestTuneDockerKillResume: after SIGKILL, `tune --resume` removes the
// leftover container first, re-runs the trial in flight and completes the
// study with nothing left behind.
func TestTuneDockerKillResume(t *testing.T) {
	requireSimImage(t)
	bin := buildServetune(t)
	t.Parallel()
	spec, name := quickDockerStudy(t)
	removeContainersOf(t, name)
	db := filepath.Join(t.TempDir(), "t.db")
	killed := killInFlight(t, bin, spec, db, name)
	out, err := testCommand(t, bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	for _, want := range []string{"removed 1 leftover docker engine(s)", fmt.Sprintf("re-ran interrupted trials [%d]", killed)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("resume output lacks %q:\n%s", want, out)
		}
	}
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) != 6 || countStatus(doc, "ok") < 3 || countStatus(doc, "interrupted") != 0 {
		t.Errorf("after resume: %d trials, %d ok, %d interrupted", len(doc.Trials), countStatus(doc, "ok"), countStatus(doc, "interrupted"))
	}
	if left := containersOf(t, name); len(left) != 0 {
		t.Errorf("containers left after resume: %v", left)
	}
}

// TestTuneDockerTwoHosts spreads a study over two Docker "hosts" that are
// the local daemon named two ways: trials run on both at once, each on one
// host's GPU, and none is left behind on either.
func TestTuneDockerTwoHosts(t *testing.T) {
	requireSimImage(t)
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			t.Skip("DOCKER_HOST is not a unix socket")
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	dir, file := filepath.Split(sock)
	hosts := fmt.Sprintf("  hosts:\n    - {docker_host: \"unix://%s\", gpus: [0]}\n    - {docker_host: \"unix://%s./%s\", gpus: [0]}\n", sock, dir, file)
	bin := buildServetune(t)
	t.Parallel()
	spec, name := dockerSimStudy(t, "requests_per_level: 96", "requests_per_level: 32",
		"  gpus: [0]                 # one trial at a time\n", hosts)
	removeContainersOf(t, name)
	db := filepath.Join(t.TempDir(), "t.db")
	out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) != 6 || countStatus(doc, "ok") < 3 {
		t.Errorf("%d trials, %d ok:\n%s", len(doc.Trials), countStatus(doc, "ok"), out)
	}
	for _, want := range []string{"gpus=[0]", "gpus=[100]"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no trial started with %s:\n%s", want, out)
		}
	}
	if left := containersOf(t, name); len(left) != 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// TestTuneDockerTwoDatabases: the same study name run at once from two
// databases on one Docker host. Each run reaps only what dead runs left:
// both keep their containers and finish without a failed trial beyond the
// example's out-of-memory ones.
func TestTuneDockerTwoDatabases(t *testing.T) {
	requireSimImage(t)
	bin := buildServetune(t)
	t.Parallel()
	spec, name := dockerSimStudy(t, "requests_per_level: 96", "requests_per_level: 48")
	removeContainersOf(t, name)
	dir := t.TempDir()
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			outs[i], errs[i] = testCommand(t, bin, "tune", spec, "--db", filepath.Join(dir, fmt.Sprintf("%d.db", i))).CombinedOutput()
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("run %d: %v\n%s", i, errs[i], outs[i])
		}
		if strings.Contains(string(outs[i]), "removed") {
			t.Errorf("run %d removed containers:\n%s", i, outs[i])
		}
		doc := trialsOf(t, bin, filepath.Join(dir, fmt.Sprintf("%d.db", i)), name)
		for _, tr := range doc.Trials {
			if tr.Status != "ok" && tr.Failure != "oom" {
				t.Errorf("run %d trial %d: %s/%s %q", i, tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
			}
		}
	}
	if left := containersOf(t, name); len(left) != 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// TestTuneDockerMissingImage: an image that is not on the host is refused
// before anything is launched or stored (exit 2, one line saying how to
// get it).
func TestTuneDockerMissingImage(t *testing.T) {
	requireSimImage(t)
	spec, name := dockerSimStudy(t, "image: servetune-sim:dev", "image: servetune-sim:no-such-tag")
	db := filepath.Join(t.TempDir(), "t.db")
	code, _, errs := runIn("tune", spec, "--db", db)
	if code != exitUsage || !strings.Contains(errs, "servetune-sim:no-such-tag") || !strings.Contains(errs, "docker pull") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if len(containersOf(t, name)) != 0 {
		t.Error("a container was created")
	}
}
