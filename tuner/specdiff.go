package tuner

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

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
// measured before and after would not compare.
var (
	freeChanges  = []string{"tuner.trials"}
	fixedChanges = []string{"name", "model", "engine", "hardware.gpu", "workload"}
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
