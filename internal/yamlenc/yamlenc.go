// Package yamlenc is the one encoder of YAML documents other than
// Kubernetes manifests (those are k8s.io/api objects, written by
// sigs.k8s.io/yaml in package kube): gopkg.in/yaml.v3, with the one
// string it cannot write corrected. yaml.v3 writes a multi-line string
// that starts with a blank or a line break as a block scalar whose content
// a parser reads as something else ("\n#x" as an empty string and a
// comment, "\nkey: v" as a syntax error); such a string is written
// double-quoted instead.
package yamlenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// Encode writes v, a value or a *yaml.Node, as one YAML document indented
// by two spaces. A value is taken through its JSON form (its json tags):
// yaml.v3 builds a node by writing YAML and reading it back, which loses
// such a string before Quote could see it; JSON writes every string
// quoted, which yaml.v3 reads whole.
func Encode(w io.Writer, v any) error {
	n, ok := v.(*yaml.Node)
	if !ok {
		var js bytes.Buffer
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		n = &yaml.Node{}
		if err := yaml.Unmarshal([]byte(escapeJSON(js.String())), n); err != nil {
			return err
		}
		block(n)
	}
	Quote(n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	return enc.Close()
}

// escapeJSON writes the characters JSON leaves raw in its strings and a
// YAML reader refuses or folds (DEL, the C1 controls) as \u escapes.
func escapeJSON(js string) string {
	var b strings.Builder
	for _, r := range js {
		if r == 0x7f || r >= 0x80 && r <= 0x9f {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// block drops the flow style and quotes JSON gave the nodes, for YAML's
// block style; the encoder quotes a string that would read as another
// type.
func block(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		block(c)
	}
}

// Quote sets the style of every string of n that yaml.v3 would write as a
// block it cannot read back to double-quoted.
func Quote(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "\n") && strings.IndexAny(n.Value, " \t\n\r") == 0 {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		Quote(c)
	}
}
