package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/tuner/spec"
)

// whatifSpec is goodSpec with a whatif section; the cases append lines
// under it (line 21 on).
var whatifSpec = goodSpec + "whatif:\n  gpus: [H100-SXM]\n"

// TestWhatifDeploymentKeys reads whatif.shapes, whatif.kv_link and
// whatif.speculative, its method and tokens defaulting as the flags do.
func TestWhatifDeploymentKeys(t *testing.T) {
	study, err := parseSpec([]byte(whatifSpec+`  shapes: [aggregated, disaggregated]
  kv_link: infiniband
  speculative: {acceptance: 0.65, draft: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B}
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := study.Whatif
	if strings.Join(w.Shapes, ",") != "aggregated,disaggregated" || w.KVLink != "infiniband" {
		t.Errorf("shapes %q, link %q", w.Shapes, w.KVLink)
	}
	want := spec.WhatifSpeculation{Method: "eagle3", Tokens: 3, Draft: "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", Acceptance: 0.65}
	if w.Speculative == nil || *w.Speculative != want {
		t.Errorf("speculative %+v, want %+v", w.Speculative, want)
	}
	study, err = parseSpec([]byte(whatifSpec+"  speculative: {acceptance: 0, method: ngram, tokens: 6}\n"), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s := study.Whatif.Speculative; s == nil || *s != (spec.WhatifSpeculation{Method: "ngram", Tokens: 6}) {
		t.Errorf("ngram: %+v", s)
	}
}

// TestWhatifDeploymentBad: each bad value is one line naming its file,
// line and key.
func TestWhatifDeploymentBad(t *testing.T) {
	for _, tc := range []struct {
		name, lines string
		line        int
		field, msg  string
	}{
		{"unknown shape", "  shapes: [aggregated, mixed]\n", 23, "whatif.shapes", `"mixed": want aggregated, disaggregated or both`},
		{"no shapes", "  shapes: []\n", 23, "whatif.shapes", "empty"},
		{"shapes not a list", "  shapes: {a: 1}\n", 23, "whatif.shapes", "list"},
		{"unknown link", "  kv_link: smoke\n", 23, "whatif.kv_link", `"smoke": want one of nvlink, pcie, infiniband, roce, ethernet`},
		{"no acceptance", "  speculative: {method: ngram}\n", 23, "whatif.speculative.acceptance", "missing"},
		{"acceptance past 1", "  speculative: {acceptance: 1.2, method: ngram}\n", 23, "whatif.speculative.acceptance", "1.2: want a rate in [0, 1]"},
		{"negative acceptance", "  speculative: {acceptance: -0.1, method: ngram}\n", 23, "whatif.speculative.acceptance", "want a rate in [0, 1]"},
		{"no tokens", "  speculative: {acceptance: 0.5, method: ngram, tokens: 0}\n", 23, "whatif.speculative.tokens", "below the minimum 1"},
		{"unknown method", "  speculative: {acceptance: 0.5, method: medusa}\n", 23, "whatif.speculative.method", `"medusa": want eagle, eagle3, mtp, ngram or draft_model`},
		{"eagle3 without draft", "  speculative: {acceptance: 0.5}\n", 23, "whatif.speculative.draft", "method eagle3 needs a draft"},
		{"draft_model without draft", "  speculative:\n    acceptance: 0.5\n    method: draft_model\n", 24, "whatif.speculative.draft", "method draft_model needs a draft"},
		{"unknown speculative key", "  speculative: {acceptance: 0.5, method: ngram, rate: 2}\n", 23, "whatif.speculative.rate", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSpec([]byte(whatifSpec+tc.lines), "w.yaml")
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *yamlpos.Error", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || se.Line != tc.line || se.Field != tc.field || !strings.Contains(msg, tc.msg) {
				t.Errorf("%q (line %d, field %q); want one line, line %d, field %q, with %q", msg, se.Line, se.Field, tc.line, tc.field, tc.msg)
			}
		})
	}
}
