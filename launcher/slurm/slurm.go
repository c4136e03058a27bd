package slurm

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

// Slurm launches each trial's engine as a Slurm batch job.
type Slurm struct {
	Partition string        // sbatch --partition; "" = the cluster's default
	Account   string        // --account
	QOS       string        // --qos
	TimeLimit time.Duration // --time; 0 = the partition's default
	// GRES is what a job asks for per node, "{n}" standing for the trial's
	// GPU count; default "gpu:{n}".
	GRES string
	// Container wraps the engine's command (a site's container runtime):
	// an argv template whose element "{command}" is the engine's argv
	// (appended when absent), e.g. apptainer exec --nv vllm.sif {command}.
	Container []string
	Modules   []string // `module load`ed before the engine starts
	// SbatchArgs are further sbatch flags, verbatim (--constraint=h100).
	SbatchArgs []string
	// WorkDir holds each job's script, log and address file: a directory
	// the compute nodes and this machine share. "" = .servetune/slurm.
	WorkDir string
	PassEnv []string // names of variables the job gets (launcher.env); it gets this process's environment

	// Simulated runs the simulated engine (`servetune sim serve`, Binary)
	// instead of the engine, with GPU, time scale and load time in its
	// environment (engine.SimEnv).
	Simulated bool
	Binary    string // the servetune binary the job runs; "" = this one (os.Executable)
	GPU       string // hardware.gpu, for the simulated engine
	Scale     float64
	LoadTime  time.Duration
	ModelConf string

	Poll        time.Duration // the job's files and /health; default launcher.DefaultPollInterval
	QueuePoll   time.Duration // squeue; default DefaultQueuePoll
	StopTimeout time.Duration // scancel to ended; default DefaultStopTimeout
	LogBytes    int           // default launcher.DefaultLogBytes
}

// DefaultQueuePoll is how often a job's state is read with squeue: often
// enough to notice a cancelled job within a second, a light load on the
// controller (one squeue per trial in flight).
const DefaultQueuePoll = 500 * time.Millisecond

// DefaultStopTimeout bounds Stop's wait from scancel to an ended job: Slurm
// sends SIGTERM, then SIGKILL after its KillWait (30 s by default).
const DefaultStopTimeout = 90 * time.Second

var _ launcher.Launcher = (*Slurm)(nil)

// Capabilities: reaping by job comment, sbatch --test-only's preflight,
// the simulated engine's time scale (doc.go says why no more).
func (s *Slurm) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{Reap: s.Reap, TimeScale: s.TimeScale(), Preflight: s.Preflight}
}

// TimeScale is the simulated engine's time scale (1 for real engines).
func (s *Slurm) TimeScale() float64 {
	if !s.Simulated {
		return 1
	}
	return simenv.TimeScale(s.Scale)
}

// Reap cancels the jobs earlier runs of study left, but those keep spares.
func (s *Slurm) Reap(ctx context.Context, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	return reap(ctx, commands{}, study, keep)
}

var launches atomic.Uint64 // makes file names unique within a process

// Launch writes the job's script and submits it. It does not wait for the
// job to start: Ready does.
func (s *Slurm) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	argv, err := s.engineArgv(spec)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(launcher.OrDefault(s.WorkDir, filepath.Join(".servetune", "slurm")))
	if err != nil {
		return nil, fmt.Errorf("slurm launcher: work dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("slurm launcher: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", jobName(spec), strconv.FormatInt(time.Now().UnixNano(), 36), launches.Add(1)))
	f := files{script: base + ".sh", log: base + ".log", addr: base + ".addr"}
	if err := os.WriteFile(f.script, []byte(jobScript(spec, f.addr, argv, s.Modules)), 0o700); err != nil {
		return nil, fmt.Errorf("slurm launcher: write the job script: %w", err)
	}
	c := commands{env: s.jobEnv(spec)}
	id, err := c.sbatch(ctx, append(s.sbatchArgs(spec, len(spec.GPUs)), "--job-name="+jobName(spec),
		"--comment="+jobComment(spec), "--output="+f.log, f.script)...)
	if err != nil {
		f.remove()
		if strings.Contains(err.Error(), errNodeConfig) {
			// Slurm names neither the node nor its state: ask sinfo.
			if nodes, serr := c.sinfoNodes(ctx, s.Partition); serr == nil {
				hint, _ := nodeHint(nodes, s.Partition)
				err = fmt.Errorf("%w; %s", err, hint)
			}
		}
		return nil, fmt.Errorf("slurm: submit trial %d: %w", spec.Trial, err)
	}
	return newJob(s, id, f), nil
}

// sbatchArgs are the flags every job of the study gets, asking for n GPUs.
func (s *Slurm) sbatchArgs(spec launcher.Spec, n int) []string {
	// No requeue: a job requeued after a node failure would come back
	// elsewhere on another port; the trial fails instead, classified. The
	// whole environment goes (as sbatch's default does; a site may change
	// that default), so launcher.env reaches the engine without its values
	// being written anywhere.
	args := []string{"--no-requeue", "--export=ALL", "--nodes=1"}
	if s.Partition != "" {
		args = append(args, "--partition="+s.Partition)
	}
	if s.Account != "" {
		args = append(args, "--account="+s.Account)
	}
	if s.QOS != "" {
		args = append(args, "--qos="+s.QOS)
	}
	if s.TimeLimit > 0 {
		args = append(args, "--time="+slurmTime(s.TimeLimit))
	}
	if n > 0 {
		args = append(args, "--gres="+strings.ReplaceAll(launcher.OrDefault(s.GRES, "gpu:{n}"), "{n}", strconv.Itoa(n)))
	}
	return append(args, s.SbatchArgs...)
}

// slurmTime writes a duration as Slurm's D-HH:MM:SS, rounded up to a
// whole second.
func slurmTime(d time.Duration) string {
	t := int64(math.Ceil(d.Seconds()))
	return fmt.Sprintf("%d-%02d:%02d:%02d", t/86400, t%86400/3600, t%3600/60, t%60)
}

// jobEnv is sbatch's environment: this process's, the engine's variables,
// and the simulated engine's facts.
func (s *Slurm) jobEnv(spec launcher.Spec) []string {
	env := append(os.Environ(), launcher.PassEnv(s.PassEnv, os.LookupEnv)...)
	if s.Simulated {
		lt := ""
		if s.LoadTime > 0 {
			lt = s.LoadTime.String()
		}
		env = append(env, engine.SimEnv(s.GPU, max(len(spec.GPUs), 1), s.Scale, lt)...)
		env = append(env, engine.EnvSimEngine+"="+string(spec.Engine))
		if s.ModelConf != "" {
			env = append(env, engine.EnvSimModelConfig+"="+s.ModelConf)
		}
	}
	return append(env, spec.Env...)
}

// Placeholders the job script fills in: the address the engine binds and
// the port it picked on its node.
const (
	hostVar = "{host}"
	portVar = "{port}"
)

// engineArgv is the job's command: the engine's serve command from the
// engine vocabulary (or the simulated engine's), listening on {host} and
// {port}, inside the container template when there is one.
func (s *Slurm) engineArgv(spec launcher.Spec) ([]string, error) {
	if spec.Model == "" {
		return nil, fmt.Errorf("%w: slurm launcher needs a model", launcher.ErrBadSpec)
	}
	args, err := spec.Args()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
	}
	e := spec.Engine
	if e == "" {
		e = engine.VLLM
	}
	var argv []string
	switch {
	case s.Simulated:
		bin := s.Binary
		if bin == "" {
			if bin, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("slurm launcher: find the servetune binary: %w", err)
			}
		}
		for _, a := range append([]string{bin}, engine.SimServeArgs()...) {
			switch a {
			case "{model}":
				argv = append(argv, spec.Model)
			case "{args}":
				argv = append(argv, args...)
			default:
				argv = append(argv, a)
			}
		}
	case e.Valid():
		argv = append(engine.ServeCommand(e, spec.Model, nil, nil), args...)
		argv = append(argv, engine.Flag(e, "host"), hostVar, engine.Flag(e, "port"), portVar)
	default:
		return nil, fmt.Errorf("%w: slurm launcher: engine %q (want vllm or sglang)", launcher.ErrBadSpec, e)
	}
	if len(s.Container) == 0 {
		return argv, nil
	}
	var out []string
	wrapped := false
	for _, a := range s.Container {
		if a == "{command}" {
			out, wrapped = append(out, argv...), true
			continue
		}
		out = append(out, a)
	}
	if !wrapped {
		out = append(out, argv...)
	}
	return out, nil
}

// jobScript is the batch script of one trial. It starts by noting its node
// and GPUs in the log, loads the modules, picks a free port on its node,
// writes "NODE PORT" to addr (renamed into place, so a reader never sees
// half of it), and execs the engine, so the job's exit status is the
// engine's and scancel's signals reach it.
func jobScript(spec launcher.Spec, addr string, argv, modules []string) string {
	var b strings.Builder
	shell := "#!/bin/bash"
	if len(modules) > 0 {
		shell += " -l" // a login shell defines `module`
	}
	part := ""
	if spec.Part != "" {
		part = ", " + engine.ShellQuote(spec.Part) + ","
	}
	fmt.Fprintf(&b, "%s\n# servetune: trial %d%s of study %s (launcher/slurm). Generated; removed when the trial ends.\n", shell, spec.Trial, part, engine.ShellQuote(spec.Study))
	b.WriteString("set -u\n")
	b.WriteString(`echo "servetune: slurm job ${SLURM_JOB_ID:-?} on $(hostname), GPUs ${CUDA_VISIBLE_DEVICES:-none}"` + "\n")
	for _, m := range modules {
		fmt.Fprintf(&b, "module load %s || { echo servetune: module load %s failed >&2; exit 1; }\n", engine.ShellQuote(m), engine.ShellQuote(m))
	}
	// The port is drawn below the node's ephemeral range (where outgoing
	// connections take theirs: a client dialling a port nobody listens on
	// yet can even be given that very port and connect to itself), and
	// bash's /dev/tcp skips one someone listens on. Another process may
	// still take it first; the engine then fails to bind and exits, which
	// the trial reports.
	b.WriteString(`lo=10000 hi=32768
if read -r elo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$elo" -gt $((lo + 1000)) ]; then hi=$elo; fi
port=
for _ in $(seq 200); do
	p=$((lo + RANDOM % (hi - lo)))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "servetune: no free port on $(hostname)" >&2; exit 1; }
`)
	fmt.Fprintf(&b, "printf '%%s %%s\\n' \"$(hostname)\" \"$port\" >%s.tmp && mv %s.tmp %s\n", engine.ShellQuote(addr), engine.ShellQuote(addr), engine.ShellQuote(addr))
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = shellWord(a)
	}
	fmt.Fprintf(&b, "exec %s\n", strings.Join(words, " "))
	return b.String()
}

// shellWord quotes one argument for bash (engine.ShellQuote, whose words
// stay on one line: a study name or model path with a line break cannot end
// the script's comment or start a command), with {host} the address to bind
// (all of the node's interfaces: this machine reaches it over the network)
// and {port} the port the script picked.
func shellWord(a string) string {
	var b strings.Builder
	for {
		i, ph := -1, ""
		for _, p := range []string{hostVar, portVar} {
			if k := strings.Index(a, p); k >= 0 && (i < 0 || k < i) {
				i, ph = k, p
			}
		}
		if i < 0 {
			if a != "" || b.Len() == 0 {
				b.WriteString(engine.ShellQuote(a))
			}
			return b.String()
		}
		if i > 0 {
			b.WriteString(engine.ShellQuote(a[:i]))
		}
		if ph == hostVar {
			b.WriteString(`'0.0.0.0'`)
		} else {
			b.WriteString(`"$port"`)
		}
		a = a[i+len(ph):]
	}
}

// files are a job's files in the work dir.
type files struct{ script, log, addr string }

func (f files) remove() {
	for _, p := range []string{f.script, f.addr, f.addr + ".tmp", f.log} {
		_ = os.Remove(p)
	}
}
