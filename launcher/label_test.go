package launcher

import (
	"testing"

	"github.com/servetune/servetune/internal/hostile"
)

// TestLabelRoundTrip: every study name reads back exactly from both forms.
func TestLabelRoundTrip(t *testing.T) {
	for _, study := range append([]string{"llama", "a b&c=d%e", "ünï/codé", ""}, hostile.Strings...) {
		l := Label{Study: study, Trial: 7, Owner: "gpu-a/123/456/beef"}
		if got, ok := Parse(l.String()); !ok || got != l {
			t.Errorf("Parse(%q) = %+v, %v", l.String(), got, ok)
		}
		if got, ok := ParseLabels(l.Labels()); !ok || got != l {
			t.Errorf("ParseLabels(%v) = %+v, %v", l.Labels(), got, ok)
		}
	}
}

// TestLabelOld: the forms an older servetune wrote still read, so its
// leftovers are reaped; other text and maps are not ours.
func TestLabelOld(t *testing.T) {
	want := Label{Study: "s", Trial: 3, Owner: "h/1/2/r"}
	for _, m := range []map[string]string{
		{"servetune.managed": "true", "servetune.study": "s", "servetune.trial": "3", "servetune.owner": "h/1/2/r", "servetune.engine": "vllm"},
		{"SERVETUNE_STUDY": "s", "SERVETUNE_TRIAL": "3", "SERVETUNE_OWNER": "h/1/2/r"},
	} {
		if got, ok := ParseLabels(m); !ok || got != want {
			t.Errorf("ParseLabels(%v) = %+v, %v", m, got, ok)
		}
	}
	if got, ok := Parse("servetune:study=s&trial=3&owner=h%2F1%2F2%2Fr"); !ok || got != want {
		t.Errorf("old comment read as %+v, %v", got, ok)
	}
	for _, m := range []map[string]string{
		{}, {"servetune.study": "s", "servetune.trial": "3"}, {"SERVETUNE_STUDY": "", "SERVETUNE_TRIAL": "3"},
		{LabelManaged: "true", LabelStudy: "s", LabelTrial: "x"}, {"com.example/study": "s"},
	} {
		if l, ok := ParseLabels(m); ok {
			t.Errorf("ParseLabels(%v) read as ours: %+v", m, l)
		}
	}
	for _, c := range []string{"", "servetune", "servetune:trial=1", "servetune:study=x&trial=one", "my job: servetune:study=x&trial=1",
		"servetune-x-t1", "servetune.io/study=x&servetune.io/trial=1", "x&" + LabelManaged + "=true&" + LabelStudy + "=x&" + LabelTrial + "=1"} {
		if l, ok := Parse(c); ok {
			t.Errorf("Parse(%q) read as ours: %+v", c, l)
		}
	}
}
