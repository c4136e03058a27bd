package spec

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
)

// WhatifSpeculation is whatif.speculative: speculative decoding whatif
// also tries, at an acceptance rate the simulator takes as given (the
// --spec-acceptance flags of `servetune whatif`).
type WhatifSpeculation struct {
	Method     string  // eagle, eagle3, mtp, ngram, draft_model (default eagle3)
	Tokens     int     // draft tokens per step (default 3)
	Draft      string  // the draft head or model
	Acceptance float64 // each draft token's chance of acceptance, in [0, 1]
}

// whatifDeployment reads whatif.shapes, whatif.kv_link and
// whatif.speculative, with the rules of their command-line flags.
func (p *specParser) whatifDeployment(f map[string]*yaml.Node, w *WhatifSpec) {
	if x := f["shapes"]; x != nil {
		w.Shapes = p.Strings(x, "whatif.shapes")
		if !p.Failed() && len(w.Shapes) == 0 {
			p.Fail(x, "whatif.shapes", "empty: want aggregated, disaggregated or both")
		}
		for _, s := range w.Shapes {
			if !slices.Contains(engine.Shapes, s) && !p.Failed() {
				p.Fail(x, "whatif.shapes", "%q: want aggregated, disaggregated or both", s)
			}
		}
	}
	if x := f["kv_link"]; x != nil {
		w.KVLink = p.Str(x, "whatif.kv_link")
		if !p.Failed() && !slices.Contains(engine.KVLinks, w.KVLink) {
			p.Fail(x, "whatif.kv_link", "%q: want one of %s", w.KVLink, strings.Join(engine.KVLinks, ", "))
		}
	}
	if x := f["speculative"]; x != nil {
		w.Speculative = p.whatifSpeculative(x)
	}
}

func (p *specParser) whatifSpeculative(n *yaml.Node) *WhatifSpeculation {
	f := p.Fields(n, "whatif.speculative", "acceptance", "tokens", "method", "draft")
	s := &WhatifSpeculation{Method: "eagle3", Tokens: 3}
	x := p.Require(n, f, "whatif.speculative", "acceptance", "each draft token's chance of acceptance, in [0, 1]")
	if x == nil {
		return s
	}
	s.Acceptance = p.Number(x, "whatif.speculative.acceptance")
	if !p.Failed() && !(s.Acceptance >= 0 && s.Acceptance <= 1) {
		p.Fail(x, "whatif.speculative.acceptance", "%g: want a rate in [0, 1]", s.Acceptance)
	}
	if x := f["tokens"]; x != nil {
		s.Tokens = p.Int(x, "whatif.speculative.tokens", 1)
	}
	if x := f["method"]; x != nil {
		s.Method = p.Str(x, "whatif.speculative.method")
		if !p.Failed() && !slices.Contains(engine.SpeculativeMethods, s.Method) {
			p.Fail(x, "whatif.speculative.method", "%q: want eagle, eagle3, mtp, ngram or draft_model", s.Method)
		}
	}
	if x := f["draft"]; x != nil {
		s.Draft = p.Str(x, "whatif.speculative.draft")
	}
	if !p.Failed() && s.Draft == "" && engine.NeedsDraft(s.Method) {
		p.Fail(n, "whatif.speculative.draft", "method %s needs a draft (the draft head or model the serve command names)", s.Method)
	}
	return s
}
