package yamlenc

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/hostile"
)

// TestEncodeHostile: every hostile string as a key, a value and a list
// item comes back whole, in a document of the same keys.
func TestEncodeHostile(t *testing.T) {
	for _, h := range hostile.Strings {
		if !utf8.ValidString(h) {
			continue // yaml.v3 writes no invalid UTF-8
		}
		in := map[string]any{"k" + h: h, "command": []any{"vllm", h, "--x"}, "n": map[string]any{"v": h}}
		var b bytes.Buffer
		if err := Encode(&b, in); err != nil {
			t.Errorf("%q: %v", h, err)
			continue
		}
		var out map[string]any
		if err := yaml.Unmarshal(b.Bytes(), &out); err != nil || !reflect.DeepEqual(in, out) {
			t.Errorf("%q: read back %#v, %v\n%s", h, out, err, b.String())
		}
	}
	var b bytes.Buffer
	if err := Encode(&b, map[string]string{"a": "line 1\nline 2\n"}); err != nil || !strings.Contains(b.String(), "a: |") {
		t.Errorf("a plain multi-line string is no longer a block: %s", b.String())
	}
}
