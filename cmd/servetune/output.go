package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The files a command writes: --json on every command that has it, and
// the other flags that name an output file (--csv, --html, --requests-out,
// -o/--output). Each is registered here (addJSONFlag, addOutputFlag),
// checked before the command does its work (checkOutputs, from the root's
// pre-run, or after their own parse for the commands that parse their
// arguments themselves) and written by one writer (openOutput,
// writeOutput) that takes - as standard output.

// stdoutPath is the path that names standard output.
const stdoutPath = "-"

// errJSONWants is a --json without its value: the switch it once was on
// some commands.
var errJSONWants = errors.New("--json wants a file, or - for standard output")

// outputAnnotation marks the flags that name a file a command writes.
const outputAnnotation = "servetune_output"

// jsonPath is --json's value: a file, or - for standard output. A flag in
// its place (`--json --db x`) or an empty value is refused.
type jsonPath struct{ p *string }

func (j jsonPath) String() string {
	if j.p == nil {
		return ""
	}
	return *j.p
}

func (j jsonPath) Set(v string) error {
	if v == "" || (strings.HasPrefix(v, "-") && v != stdoutPath) {
		return errJSONWants
	}
	*j.p = v
	return nil
}

func (j jsonPath) Type() string { return "PATH" }

// addJSONFlag registers --json on fs, its one spelling and help on every
// command: what names what the command writes ("the summary").
func addJSONFlag(fs *pflag.FlagSet, p *string, what string) {
	fs.Var(jsonPath{p}, "json", "write "+what+" as JSON to this file; - writes it to standard output, alone (no table)")
	_ = fs.SetAnnotation("json", outputAnnotation, []string{"true"})
}

// addOutputFlag registers a flag naming a file the command writes, so it
// is checked before the work (checkOutputs).
func addOutputFlag(fs *pflag.FlagSet, p *string, name, shorthand, usage string) {
	fs.StringVarP(p, name, shorthand, "", usage)
	_ = fs.SetAnnotation(name, outputAnnotation, []string{"true"})
}

// checkOutputs checks every output flag given in fs (checkOutputPath).
func checkOutputs(fs *pflag.FlagSet) error {
	var first error
	fs.Visit(func(f *pflag.Flag) {
		if _, ok := f.Annotations[outputAnnotation]; !ok || first != nil {
			return
		}
		first = checkOutputPath("--"+f.Name, f.Value.String())
	})
	return first
}

// checkOutputPath refuses, as a one-line usage error naming flag and path,
// an output path a command could not write at its end: one whose directory
// is missing or not writable, or that is a directory. Empty and - (standard
// output) pass.
func checkOutputPath(flag, path string) error {
	if path == "" || path == stdoutPath {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageErrorf("%s %s: is a directory; want a file", flag, path)
	}
	dir := filepath.Dir(resolvePath(path))
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErrorf("%s %s: directory %s does not exist", flag, path, filepath.Dir(path))
	case err != nil:
		return usageErrorf("%s %s: %v", flag, path, pathCause(err))
	case !fi.IsDir():
		return usageErrorf("%s %s: %s is not a directory", flag, path, filepath.Dir(path))
	}
	// The writer creates a temporary file there (openOutput): so does the
	// check, and removes it.
	f, err := os.CreateTemp(dir, ".servetune-check-*")
	if err != nil {
		return usageErrorf("%s %s: cannot write in directory %s: %v", flag, path, filepath.Dir(path), pathCause(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// pathCause is the cause of a file operation's error, without the path
// (the message names it already).
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// flagError is a flag parse error as a usage error (exit 2), a bare or
// misplaced --json saying what it wants.
func flagError(err error) error {
	var vr *pflag.ValueRequiredError
	if errors.As(err, &vr) && vr.GetFlag() != nil {
		if _, ok := vr.GetFlag().Value.(jsonPath); ok {
			return usageError(errJSONWants)
		}
	}
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) && errors.Is(err, errJSONWants) {
		return usageErrorf("%v (it got %q)", errJSONWants, iv.GetValue())
	}
	return usageError(err)
}

// checkOutputsHook is the root's pre-run: the output flags of the command
// about to run are checked before it does any work.
func checkOutputsHook(cmd *cobra.Command, _ []string) error {
	return checkOutputs(cmd.Flags())
}

// output is a file a command writes, or standard output for -. A file is
// written to a temporary file beside the one it names (symlinks resolved)
// and renamed over it by commit: a reader never sees half a file, and a
// run that fails before it leaves the old file as it was.
type output struct {
	path  string // as given
	w     io.Writer
	tmp   *os.File // nil for standard output
	final string   // the file tmp is renamed to
}

// openOutput opens path for writing; - is stdout. A path that cannot be
// created is a usage error naming it.
func openOutput(stdout io.Writer, path string) (*output, error) {
	if path == stdoutPath {
		return &output{path: path, w: stdout}, nil
	}
	final := resolvePath(path)
	fh, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".*.tmp")
	if err == nil {
		err = fh.Chmod(0o644)
	}
	if err != nil {
		if fh != nil {
			fh.Close()
			os.Remove(fh.Name())
		}
		return nil, usageErrorf("output file %s: %v", path, pathCause(err))
	}
	return &output{path: path, w: fh, tmp: fh, final: final}, nil
}

func (o *output) Write(p []byte) (int, error) { return o.w.Write(p) }

// commit closes the temporary file and renames it over the file it
// stands for; for standard output it does nothing.
func (o *output) commit() error {
	if o.tmp == nil {
		return nil
	}
	fh := o.tmp
	o.tmp = nil
	err := fh.Close()
	if err == nil {
		err = os.Rename(fh.Name(), o.final)
	}
	if err != nil {
		os.Remove(fh.Name())
		return failedError(fmt.Errorf("output file %s: %w", o.path, err))
	}
	return nil
}

// discard removes the temporary file of an output never finished.
func (o *output) discard() {
	if o.tmp == nil {
		return
	}
	o.tmp.Close()
	os.Remove(o.tmp.Name())
	o.tmp = nil
}

// writeOutput writes path (- is stdout) with write, whole or not at all.
func writeOutput(stdout io.Writer, path string, write func(io.Writer) error) error {
	o, err := openOutput(stdout, path)
	if err != nil {
		return err
	}
	if err := write(o); err != nil {
		o.discard()
		return failedError(fmt.Errorf("write %s: %w", outputName(path), err))
	}
	return o.commit()
}

// writeJSONOutput writes v as indented JSON to path (- is stdout): every
// --json's writer.
func writeJSONOutput(stdout io.Writer, path string, v any) error {
	return writeOutput(stdout, path, func(w io.Writer) error { return writeJSON(w, v) })
}

// writeJSON writes v as indented JSON to w.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// outputName names path in messages: "standard output" for -.
func outputName(path string) string {
	if path == stdoutPath {
		return "standard output"
	}
	return path
}

// tableOut is where a command prints what a person reads: standard
// output, or nowhere when --json - makes standard output the JSON's alone.
func tableOut(cmd *cobra.Command, jsonOut string) io.Writer {
	if jsonOut == stdoutPath {
		return io.Discard
	}
	return cmd.OutOrStdout()
}

// resolvePath is the absolute path of the file p names, its symlinks
// resolved (those of its directory when the file does not exist yet).
func resolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}
