package launcher

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// LabelPrefix namespaces every label key servetune writes on an engine.
const LabelPrefix = "servetune.io/"

// The label keys, LabelPrefix and a name. A kind may add keys of its own
// under LabelPrefix (the docker kind's engine).
const (
	LabelManaged = LabelPrefix + "managed" // "true"
	LabelStudy   = LabelPrefix + "study"
	LabelTrial   = LabelPrefix + "trial"
	LabelOwner   = LabelPrefix + "owner" // the run: host/pid/start/run
)

// EnvLabel is the environment variable that carries a local engine's
// label (Label.String): every process the engine starts inherits it (a
// wrapper script's engine too), so a reaper finds the whole tree of a
// killed run, not only the direct child that the parent-death signal
// reaches.
const EnvLabel = "SERVETUNE_LABEL"

// Label is the one codec of what every engine of ours carries so that a
// reaper finds what a killed run left: a container's labels (Labels), a
// Slurm job's comment or a process's environment (String). Parse and
// ParseLabels also read the forms older servetune wrote, so an old run's
// leftovers are reaped.
type Label struct {
	Study string
	Trial int
	Owner string // "" when unknown
}

// LabelOf is spec's label.
func LabelOf(spec Spec) Label { return Label{Study: spec.Study, Trial: spec.Trial, Owner: spec.Owner} }

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ReadableName is a trial's name as `docker ps` and squeue show it:
// servetune-STUDY-tN, and for a part of a trial of several engines
// servetune-STUDY-tN-prefill0. STUDY keeps letters, digits, "_", "." and
// "-" (a run of anything else becomes "-"), at most 40 of them, "adhoc"
// for none. It is for people: the label, not the name, identifies an
// engine, and a kind that needs a unique name adds to it.
func ReadableName(spec Spec) string {
	study := strings.Trim(nameUnsafe.ReplaceAllString(spec.Study, "-"), "-._")
	if len(study) > 40 {
		study = study[:40]
	}
	if study == "" {
		study = "adhoc"
	}
	name := fmt.Sprintf("servetune-%s-t%d", study, spec.Trial)
	if part := strings.Trim(nameUnsafe.ReplaceAllString(spec.Part, ""), "-._"); part != "" {
		name += "-" + part
	}
	return name
}

// Labels is l as key/value pairs (a container's labels).
func (l Label) Labels() map[string]string {
	return map[string]string{LabelManaged: "true", LabelStudy: l.Study, LabelTrial: strconv.Itoa(l.Trial), LabelOwner: l.Owner}
}

// String is l as one line of text: the pairs of Labels, query-encoded in a
// fixed order, so any study name reads back exactly.
func (l Label) String() string {
	var b strings.Builder
	for i, kv := range [][2]string{{LabelManaged, "true"}, {LabelStudy, l.Study}, {LabelTrial, strconv.Itoa(l.Trial)}, {LabelOwner, l.Owner}} {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(kv[0] + "=" + url.QueryEscape(kv[1]))
	}
	return b.String()
}

// The forms older servetune wrote: a container's labels, a process's
// environment, a Slurm job's comment (the prefix, then study, trial and
// owner query-encoded).
const (
	OldLabelManaged = "servetune.managed" // "true"; a reaper's filter finds old containers by it
	oldLabelStudy   = "servetune.study"
	oldLabelTrial   = "servetune.trial"
	oldLabelOwner   = "servetune.owner"
	oldEnvStudy     = "SERVETUNE_STUDY"
	oldEnvTrial     = "SERVETUNE_TRIAL"
	oldEnvOwner     = "SERVETUNE_OWNER"
	oldComment      = "servetune:"
)

// ParseLabels reads Labels' pairs, or those older servetune wrote
// (servetune.managed, servetune.study, ...; SERVETUNE_STUDY, ... in an
// environment); ok is false without a study and a trial number.
func ParseLabels(m map[string]string) (Label, bool) {
	if m[LabelManaged] == "true" {
		return parseLabel(m[LabelStudy], m[LabelTrial], m[LabelOwner], true)
	}
	if m[OldLabelManaged] == "true" {
		return parseLabel(m[oldLabelStudy], m[oldLabelTrial], m[oldLabelOwner], true)
	}
	study := m[oldEnvStudy]
	return parseLabel(study, m[oldEnvTrial], m[oldEnvOwner], study != "")
}

// Parse reads String's text, or a Slurm job comment older servetune wrote
// ("servetune:study=...&trial=...&owner=..."); ok is false for any other
// text (another program's job, or a person's comment).
func Parse(s string) (Label, bool) {
	if rest, old := strings.CutPrefix(s, oldComment); old {
		v, err := url.ParseQuery(rest)
		if err != nil || !v.Has("study") {
			return Label{}, false
		}
		return parseLabel(v.Get("study"), v.Get("trial"), v.Get("owner"), true)
	}
	if !strings.HasPrefix(s, LabelManaged+"=") {
		return Label{}, false
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return Label{}, false
	}
	m := make(map[string]string, len(v))
	for k := range v {
		m[k] = v.Get(k)
	}
	return ParseLabels(m)
}

func parseLabel(study, trial, owner string, ok bool) (Label, bool) {
	n, err := strconv.Atoi(trial)
	if !ok || err != nil {
		return Label{}, false
	}
	return Label{Study: study, Trial: n, Owner: owner}, true
}
