// Package yamlpos decodes YAML with positions: yaml.v3 nodes, which keep
// line numbers, read with a Decoder that records the first
// problem as an *Error printing "file:line: field: problem". The study spec
// parser (tuner), the search space (space) and every launcher kind
// (launcher.Register) decode their own sections with it, so errors look
// the same whichever section they come from:
//
//	d := &yamlpos.Decoder{File: "study.yaml"}
//	f := d.Fields(node, "launcher", "kind", "gpus")
//	kind := d.Str(f["kind"], "launcher.kind")
//	if err := d.Err(); err != nil {
//		return err // study.yaml:7: launcher.kind: want a string
//	}
//
// A Decoder is not safe for concurrent use; an Error is a plain value.
package yamlpos
