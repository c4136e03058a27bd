// Command servetune finds the best way to serve a large language model: it
// benchmarks OpenAI-compatible endpoints, simulates engines, and tunes engine
// launch settings. See the README for the quick start.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/selfstats"
	"github.com/servetune/servetune/internal/term"
	_ "github.com/servetune/servetune/launcher/kinds" // every launcher kind a study may name
)

// Exit codes (docs/reliability.md, and the README says the same).
const (
	exitOK      = 0
	exitFailed  = 1 // the run failed
	exitUsage   = 2 // usage or input error
	exitSLOMiss = 3 // SLOs not met where the user asked for a gate
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports bad flags, values or input files: exit 2.
func usageErrorf(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// usageError wraps err as a usage error: exit 2.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, err: err}
}

// failedError wraps err as a run failure: exit 1.
func failedError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitFailed, err: err}
}

// newRoot builds the whole command tree. It is rebuilt for every invocation so
// tests can run commands in memory without shared flag state.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "servetune",
		Short:         "Benchmark, simulate and tune LLM serving engines (vLLM, SGLang)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError(err) })
	// Output paths are checked before any command does its work
	// (output.go); commands that parse their own flags check them there.
	root.PersistentPreRunE = checkOutputsHook
	// The top-level commands, a file each (the read-only study commands
	// share study.go).
	for _, mk := range []func() *cobra.Command{
		newBenchCmd, newCalibrateCmd, newCleanupCmd, newDiagnoseCmd, newEvalCmd, newGPUsCmd, newPlanCmd,
		newReportCmd, newSimCmd, newStudiesCmd, newTrialsCmd, newParetoCmd, newRecommendCmd, newTuneCmd,
		newUICmd, newWhatifCmd,
	} {
		root.AddCommand(mk())
	}
	return root
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// run executes one invocation and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(joinGoodput(args))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "servetune: %s\n", term.Clean(err.Error())) // errors quote servers and engines
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Cobra's own errors (unknown command, bad args) are usage errors.
	return exitUsage
}

// envSelfStats, set to an interval (SERVETUNE_SELF_STATS=1m), makes any
// command print its own RSS, heap, goroutines and open files to stderr at
// that interval: `make soak` watches bench and sim serve this way.
const envSelfStats = "SERVETUNE_SELF_STATS"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopStats := func() {}
	if v := os.Getenv(envSelfStats); v != "" {
		every, err := time.ParseDuration(v)
		if err != nil || every <= 0 {
			fmt.Fprintf(os.Stderr, "servetune: %s=%q: want a duration like 1m\n", envSelfStats, v)
			os.Exit(exitUsage)
		}
		name := "servetune"
		if len(os.Args) > 1 {
			name = os.Args[1]
		}
		stopStats = selfstats.Every(ctx, os.Stderr, name, every)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopStats()
	stop()
	os.Exit(code)
}
