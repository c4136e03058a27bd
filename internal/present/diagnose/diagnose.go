package diagnose

import (
	"fmt"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Severity says how much a finding asks of the reader.
type Severity string

// Severities, most pressing first.
const (
	Action  Severity = "action"  // a setting to change, with the evidence that it binds
	Warning Severity = "warning" // the figures, or the load, are not what they seem
	Info    Severity = "info"    // where the time goes
)

// Evidence is one measured figure behind a finding.
type Evidence struct {
	Name  string  `json:"name"` // the measurement's name, e.g. num_requests_waiting_mean
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"` // "ms", "%", "requests", "" for a count
}

// String writes "name 12.3 unit".
func (e Evidence) String() string {
	v := fmt.Sprintf("%.4g", e.Value)
	switch e.Unit {
	case "":
		return e.Name + " " + v
	case "%":
		return e.Name + " " + v + "%"
	}
	return e.Name + " " + v + " " + e.Unit
}

// Finding is what a rule concluded about one measured load level: what
// happened (with its numbers), what to do about it (naming the engine's
// own flags), and the figures it rests on.
type Finding struct {
	Rule     string     `json:"rule"` // the rule's name (Rules)
	Severity Severity   `json:"severity"`
	Level    string     `json:"level,omitempty"` // the load level, e.g. concurrency=48
	Summary  string     `json:"summary"`         // what happened, one sentence with its numbers
	Advice   string     `json:"advice"`          // what to do
	Evidence []Evidence `json:"evidence"`
}

// String is the finding in one line: "[action] concurrency=48: summary. advice."
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] ", f.Severity)
	if f.Level != "" {
		b.WriteString(f.Level + ": ")
	}
	b.WriteString(upperFirst(f.Summary) + ". " + upperFirst(f.Advice) + ".")
	return b.String()
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// Input is what the rules look at: one measured level and, when known, the
// engine and the settings it ran with (a study knows them; `bench` against
// someone's server does not, and the rules then rest on the metrics alone).
type Input struct {
	Engine   engine.Engine   // "" = from the engine metrics, else vLLM's vocabulary
	Settings engine.Settings // nil when unknown
	Level    measure.Level
	// CacheCold says the workload's prompts share no prefix (random or
	// recorded prompts, no prefix groups): its prefix-cache hits should
	// be few, and many mean the server has seen these prompts before.
	CacheCold bool
	// Searched holds, by setting, the values a study searched (a space's
	// parameter, as space.Param.Describe writes it): advice to change a
	// setting says what the study searched of it, so that advice on the
	// recommended point does not read as if the study had not tried it.
	// Only a recommendation's caller sets it.
	Searched map[string]string
}

// engine is the engine whose flags the advice names.
func (in Input) engine() engine.Engine {
	if in.Engine.Valid() {
		return in.Engine
	}
	if e := in.Level.Summary.Engine; e != nil && engine.Engine(e.Engine).Valid() {
		return engine.Engine(e.Engine)
	}
	return engine.VLLM
}

// flag names setting in the engine's own spelling, with its value when the
// settings give one: vLLM's flag for max_running_requests, "(now 8)".
func (in Input) flag(setting string) string {
	f := engine.Flag(in.engine(), setting)
	v, ok := in.Settings[setting]
	searched := in.Searched[setting]
	switch {
	case ok && searched != "":
		return fmt.Sprintf("%s (now %s: the study searched %s and recommends %s)", f, engine.FormatValue(v), searched, engine.FormatValue(v))
	case ok:
		return fmt.Sprintf("%s (now %s)", f, engine.FormatValue(v))
	}
	return f
}

// Rule is one diagnosis: Check returns its finding for a level, or false
// when the level does not show it.
type Rule struct {
	Name  string
	Doc   string // one line: what it looks for
	Check func(Input) (Finding, bool)
}

// Level runs every rule on one level and returns the findings, in the
// order of Rules (most pressing first), each labelled with the level.
func Level(in Input) []Finding {
	var out []Finding
	for _, r := range Rules {
		if f, ok := r.Check(in); ok {
			f.Rule, f.Level = r.Name, in.Level.Label
			out = append(out, f)
		}
	}
	return out
}

// Levels runs the rules on each of a configuration's levels.
func Levels(e engine.Engine, settings engine.Settings, levels []measure.Level) []Finding {
	var out []Finding
	for _, lv := range levels {
		out = append(out, Level(Input{Engine: e, Settings: settings, Level: lv})...)
	}
	return out
}
