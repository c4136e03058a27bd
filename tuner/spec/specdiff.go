package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrSpecChanged is wrapped by Run's error when a resumed study's spec is
// not the one it was started with.
var ErrSpecChanged = errors.New("the study spec changed")

// SpecDiff returns the dotted keys whose values differ between two study
// spec texts (a key present in one only counts), sorted. Lists are
// compared whole. Texts that are not YAML mappings differ at "".
func SpecDiff(oldText, newText string) []string {
	var a, b map[string]any
	if yaml.Unmarshal([]byte(oldText), &a) != nil || yaml.Unmarshal([]byte(newText), &b) != nil {
		return []string{""}
	}
	var out []string
	diffMaps("", a, b, &out)
	sort.Strings(out)
	return out
}

func diffMaps(prefix string, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		va, okA := a[k]
		vb, okB := b[k]
		ma, isMapA := va.(map[string]any)
		mb, isMapB := vb.(map[string]any)
		switch {
		case okA && okB && isMapA && isMapB:
			diffMaps(path, ma, mb, out)
		case !okA || !okB || !reflect.DeepEqual(normalizeYAML(va), normalizeYAML(vb)):
			*out = append(*out, path)
		}
	}
}

// normalizeYAML makes 8 and 8.0 equal.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalizeYAML(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	}
	return v
}

// Spec changes a resumed study may take. Growing the trial budget needs no
// leave; the others need --force-spec; some never pass, because trials
// measured before and after would not compare. space.extra_args is fixed:
// the flags change what a trial measures, yet no trial's stored settings
// hold them, so a recommendation would print flags nothing ran with.
var (
	freeChanges  = []string{"tuner.trials"}
	fixedChanges = []string{"name", "model", "engine", "hardware.gpu", "workload", "space.extra_args"}
)

// ResumeCheck decides whether a study whose stored spec is oldText may be
// resumed with newText: the error names the changed keys. force accepts
// the changes that keep trials comparable. changed reports whether the
// stored spec is to be replaced.
func ResumeCheck(oldText, newText string, force bool) (changed bool, err error) {
	diff := SpecDiff(oldText, newText)
	if len(diff) == 0 {
		return false, nil
	}
	var need, never []string
	for _, k := range diff {
		switch {
		case slices.Contains(freeChanges, k):
		case k == "" || hasPrefix(k, fixedChanges):
			never = append(never, k)
		default:
			need = append(need, k)
		}
	}
	switch {
	case len(never) > 0:
		return false, fmt.Errorf("%w: %s changed, which makes the stored trials incomparable even with --force-spec; start a new study (another name or --db)", ErrSpecChanged, strings.Join(never, ", "))
	case len(need) > 0 && !force:
		return false, fmt.Errorf("%w: %s changed since the study began; resume with the spec it was started with, or accept the change with --force-spec", ErrSpecChanged, strings.Join(need, ", "))
	}
	return true, nil
}

func hasPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if key == p || strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// ModelCheck refuses the resume of a study whose local model changed: the
// model's identity is its config.json (stored with the study), so the same
// directory holding another config.json (32 layers, now 16) is another
// model, whose trials must not mix with the stored ones. --force-spec does
// not apply. Catalog models ("" on both sides) are named by the spec.
func ModelCheck(oldConfig, newConfig string) error {
	if oldConfig == newConfig {
		return nil
	}
	what := "the model's config.json changed since the study began"
	switch {
	case oldConfig == "":
		what = "the model is now read from a local config.json, which the study did not have"
	case newConfig == "":
		what = "the model's config.json the study began with is no longer given"
	default:
		what += fmt.Sprintf(" (sha256 %s, now %s", configHash(oldConfig), configHash(newConfig))
		if keys := configDiff(oldConfig, newConfig); keys != "" {
			what += "; " + keys
		}
		what += ")"
	}
	return modelChanged(what + ": the stored trials measured another model, which even --force-spec cannot mix in; start over with --fresh, or use another study name or --db")
}

// modelChanged is a refused resume whose model changed: an ErrSpecChanged
// (exit 2) whose message says so without the spec's words.
type modelChanged string

func (e modelChanged) Error() string { return string(e) }
func (e modelChanged) Unwrap() error { return ErrSpecChanged }

// configHash is the short content hash naming a config.json in messages.
func configHash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:6])
}

// configDiff names up to three top-level keys of two config.json texts
// whose values differ, with both values: "num_hidden_layers 32 -> 16".
func configDiff(oldText, newText string) string {
	var a, b map[string]any
	if json.Unmarshal([]byte(oldText), &a) != nil || json.Unmarshal([]byte(newText), &b) != nil {
		return ""
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var parts []string
	show := func(m map[string]any, k string) string {
		v, ok := m[k]
		if !ok {
			return "(none)"
		}
		js, _ := json.Marshal(v)
		if len(js) > 40 {
			return string(js[:37]) + "..."
		}
		return string(js)
	}
	n := 0
	for _, k := range sorted {
		if reflect.DeepEqual(a[k], b[k]) {
			continue
		}
		if n++; n <= 3 {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", k, show(a, k), show(b, k)))
		}
	}
	if n > 3 {
		parts = append(parts, fmt.Sprintf("%d more", n-3))
	}
	return strings.Join(parts, ", ")
}
