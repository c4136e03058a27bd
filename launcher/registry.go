package launcher

import (
	"context"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/registry"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
)

// Kind is a launcher kind a study spec can name in `launcher: {kind: ...}`.
// Each kind decodes its own keys of the launcher section and builds the
// Launcher, which says what it can do beside Launch in one value
// (Launcher.Capabilities). A kind registers itself in its package's init;
// launcher/kinds imports them all.
type Kind struct {
	Name string
	// Doc is one line for the spec reference (docs/spec.md).
	Doc string
	// Keys are the kind's own keys of the launcher section, beside the
	// common ones (Common), each with one line of documentation.
	Keys []Key
	// Decode builds the launcher from the section's keys (keys holds the
	// kind's own, by name, every Required one among them) and the study's
	// common facts. It records problems in d and may return nil when it
	// does.
	Decode func(d *yamlpos.Decoder, keys map[string]*yaml.Node, c Common) Launcher
	// Cleanup, when set, removes what runs of study left on the kind's
	// default host without a spec (`servetune cleanup --study`); host is
	// the --docker-host flag ("" = the default). study "" means every
	// study; keep (may be nil) spares what it returns true for.
	Cleanup func(ctx context.Context, host, study string, keep func(Reaped) bool) ([]Reaped, error)
}

// Key documents one key of a launcher section.
type Key struct {
	Name string
	Doc  string
	// Required keys are checked before the kind's Decode runs: a
	// section without one fails with "missing".
	Required bool
}

// Common holds the keys every kind takes and the study facts a launcher
// may need.
type Common struct {
	Kind         string
	GPUs         []int         // launcher.gpus: the GPUs trials may use (one host)
	ReadyTimeout time.Duration // launcher.ready_timeout: launch to healthy
	Env          []string      // launcher.env: variable names passed to the engine (values never stored)

	Engine      engine.Engine
	Model       string
	ModelConfig string // a Hugging Face config.json for a model the catalog lacks
	GPU         string // hardware.gpu: the catalog GPU (the simulator's hardware)
	Study       string

	// Section is the launcher section, for the positions of errors about
	// missing keys.
	Section *yaml.Node
}

// CommonKeys are the keys every launcher section may have.
var CommonKeys = []Key{
	{Name: "kind", Doc: "the launcher kind: see the table of kinds"},
	{Name: "gpus", Doc: "GPU indices the study may use; trials run in parallel on disjoint subsets (default: one trial at a time)"},
	{Name: "ready_timeout", Doc: "longest wait from launch to a healthy engine (default 20m)"},
	{Name: "env", Doc: "names of environment variables handed to the engine, e.g. HF_TOKEN (values are never stored)"},
}

// DefaultReadyTimeout is launcher.ready_timeout when a spec gives none.
const DefaultReadyTimeout = 20 * time.Minute

var kinds = registry.New[Kind]("launcher")

// Register adds a launcher kind; a second kind of the same name panics.
func Register(k Kind) { kinds.Add(k.Name, k, k.Decode != nil) }

// Kinds returns the registered kinds by name.
func Kinds() []Kind { return kinds.All() }

// LookupKind returns a registered kind.
func LookupKind(name string) (Kind, bool) { return kinds.Lookup(name) }

// kindNames lists the registered kinds as "a, b or c".
func kindNames() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, k.Name)
	}
	return OrList(names)
}

// OrList joins words as "a, b or c".
func OrList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// Decode reads a study spec's launcher section: the common keys, then the
// kind's own through its Decode. c carries the study facts; the common keys
// are filled in. Problems are recorded in d.
func Decode(d *yamlpos.Decoder, n *yaml.Node, c Common) (Launcher, Common) {
	var allowed []string
	for _, k := range CommonKeys {
		allowed = append(allowed, k.Name)
	}
	owners := map[string][]string{} // key -> kinds that have it
	for _, k := range Kinds() {
		for _, key := range k.Keys {
			if !slices.Contains(allowed, key.Name) {
				allowed = append(allowed, key.Name)
			}
			owners[key.Name] = append(owners[key.Name], k.Name)
		}
	}
	f := d.Fields(n, "launcher", allowed...)
	if d.Require(n, f, "launcher", "kind", kindNames()) == nil {
		return nil, c
	}
	c.Kind = d.Str(f["kind"], "launcher.kind")
	kind, ok := LookupKind(c.Kind)
	if d.Failed() {
		return nil, c
	}
	if !ok {
		d.Fail(f["kind"], "launcher.kind", "%q: want %s", c.Kind, kindNames())
		return nil, c
	}
	own := map[string]*yaml.Node{}
	for name, v := range f {
		switch name {
		case "kind", "gpus", "ready_timeout", "env":
			continue
		}
		if !slices.ContainsFunc(kind.Keys, func(k Key) bool { return k.Name == name }) {
			d.Fail(yamlpos.KeyNode(n, name), "launcher."+name, "only for launcher kind %s", OrList(owners[name]))
			return nil, c
		}
		own[name] = v
	}
	if x := f["gpus"]; x != nil {
		c.GPUs = d.GPUs(x, "launcher.gpus")
	}
	c.ReadyTimeout = DefaultReadyTimeout
	if x := f["ready_timeout"]; x != nil {
		c.ReadyTimeout = d.Duration(x, "launcher.ready_timeout")
	}
	if x := f["env"]; x != nil {
		c.Env = d.EnvNames(x, "launcher.env")
	}
	for _, key := range kind.Keys {
		if key.Required && d.Require(n, own, "launcher", key.Name, "the "+c.Kind+" launcher needs "+key.Name) == nil {
			return nil, c
		}
	}
	if d.Failed() {
		return nil, c
	}
	c.Section = n
	l := kind.Decode(d, own, c)
	if d.Failed() {
		return nil, c
	}
	return l, c
}

// PassEnv returns KEY=VALUE for each named variable set in this process's
// environment: what a launcher hands an engine for launcher.env.
func PassEnv(names []string, lookup func(string) (string, bool)) []string {
	var env []string
	for _, name := range names {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
