package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

func init() {
	launcher.Register(launcher.Kind{
		Name: "slurm",
		Doc:  "a Slurm batch job per trial (sbatch); the scheduler places it, servetune benchmarks it over the network",
		Keys: append([]launcher.Key{
			{Name: "partition", Doc: "sbatch --partition (default: the cluster's default partition)"},
			{Name: "account", Doc: "sbatch --account"},
			{Name: "qos", Doc: "sbatch --qos"},
			{Name: "time_limit", Doc: "sbatch --time of each trial's job, e.g. 30m (default: the partition's)"},
			{Name: "gres", Doc: `what each job asks for, {n} = the trial's GPU count (default "gpu:{n}")`},
			{Name: "container", Doc: "the site's container runtime as an argv template around the engine's command, {command} = that command, e.g. [apptainer, exec, --nv, vllm.sif, \"{command}\"]"},
			{Name: "modules", Doc: "environment modules loaded before the engine starts"},
			{Name: "sbatch_args", Doc: "further sbatch flags, verbatim, e.g. [--constraint=h100]"},
			{Name: "workdir", Doc: "a directory this machine and the compute nodes share, for each job's script, log and address (default .servetune/slurm)"},
			{Name: "simulated", Doc: "true: the job runs the simulated engine (`servetune sim serve`, this binary) instead of the engine, no GPU needed"},
		}, simenv.Keys...),
		Decode:  decode,
		Cleanup: cleanup,
	})
}

// cleanup cancels the study's jobs (every servetune job of this user for
// study "") that keep does not spare. Without Slurm's commands there is
// nothing to clean.
func cleanup(ctx context.Context, _ string, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	got, err := reap(ctx, commands{}, study, keep)
	if errors.Is(err, ErrNoSlurm) {
		return nil, nil
	}
	return got, err
}

// decode reads the slurm launcher's keys.
func decode(d *yamlpos.Decoder, keys map[string]*yaml.Node, c launcher.Common) launcher.Launcher {
	s := &Slurm{PassEnv: c.Env, GPU: c.GPU, ModelConf: c.ModelConfig}
	str := func(key string) string {
		if x := keys[key]; x != nil {
			return d.Str(x, "launcher."+key)
		}
		return ""
	}
	list := func(key string) []string {
		if x := keys[key]; x != nil {
			return d.Strings(x, "launcher."+key)
		}
		return nil
	}
	s.Partition, s.Account, s.QOS, s.GRES = str("partition"), str("account"), str("qos"), str("gres")
	s.Container, s.Modules, s.SbatchArgs = list("container"), list("modules"), list("sbatch_args")
	if x := keys["time_limit"]; x != nil {
		s.TimeLimit = d.Duration(x, "launcher.time_limit")
	}
	if x := keys["simulated"]; x != nil {
		s.Simulated = d.Bool(x, "launcher.simulated")
	}
	if x := keys["workdir"]; x != nil {
		// Relative to where the study is started, fixed now: the jobs run
		// elsewhere.
		if w := d.Str(x, "launcher.workdir"); !d.Failed() {
			abs, err := filepath.Abs(w)
			if err != nil {
				d.Fail(x, "launcher.workdir", "%v", err)
			}
			s.WorkDir = abs
		}
	}
	if d.Failed() {
		return nil
	}
	if x := keys["gres"]; x != nil && !strings.Contains(s.GRES, "{n}") {
		d.Fail(x, "launcher.gres", "%q has no {n}: each trial asks for its own GPU count", s.GRES)
		return nil
	}
	for _, key := range []string{"partition", "account", "qos"} {
		if x := keys[key]; x != nil && strings.ContainsAny(str(key), " \t\n") {
			d.Fail(x, "launcher."+key, "%q: no spaces in a Slurm name", str(key))
			return nil
		}
	}
	if !s.Simulated {
		for _, key := range []string{"time_scale", "load_time"} {
			if keys[key] != nil {
				d.Fail(yamlpos.KeyNode(c.Section, key), "launcher."+key, "only with simulated: true")
				return nil
			}
		}
	}
	s.Scale, s.LoadTime = simenv.DecodeKeys(d, keys)
	return s
}

// Preflight asks Slurm whether a job of the study could be scheduled
// (sbatch --test-only: the partition, account, QOS, time limit and GRES of
// a one-GPU trial; nothing is submitted) and, for the simulated engine,
// whether it can model the study.
func (s *Slurm) Preflight(ctx context.Context, spec launcher.Spec) error {
	if s.Simulated {
		if err := simenv.Preflight(spec.Model, s.ModelConf, s.GPU); err != nil {
			return err
		}
	}
	args := append([]string{"--test-only"}, s.sbatchArgs(spec, 1)...)
	_, err := commands{}.run(ctx, nil, "sbatch", append(args, "--wrap=true")...)
	if err != nil {
		return fmt.Errorf("slurm: a trial's job could not be scheduled: %w", err)
	}
	return nil
}
