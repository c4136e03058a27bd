package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// Deployment is a disaggregated deployment (docs/reference.md
// (Disaggregated prefill and decode)): PrefillReplicas engines of the
// Prefill configuration and DecodeReplicas of the Decode one, each with
// its own parallel layout (tensor, and data and expert parallelism for
// MoE models: moe.go), the KV cache crossing Link from the one to the
// other, and the router's round-robin over each side.
type Deployment struct {
	Prefill, Decode                 Config
	PrefillReplicas, DecodeReplicas int
	Link                            string // a Links name; "" is DefaultLink
	// DecodeNoConnector says the decode engines were started without a
	// KV connector: vLLM V1's scheduler takes a request's externally
	// computed tokens only from its connector (get_num_new_matched_tokens
	// in vllm/v1/core/sched/scheduler.py, under "if self.connector is not
	// None"), so such an engine ignores the kv_transfer_params and
	// computes the whole prompt itself, after the prefill engine has
	// computed it too, and no KV crosses the link. Dynamo 1.0 made the
	// connector explicit (ai-dynamo/dynamo PR #6450, merged February 2026
	// and in v1.0.0; PR #6554: "nixl is no longer the default KV transfer
	// connector"; components/src/dynamo/vllm/args.py at 000a36a7: "the
	// default is already no connector", only a prefill worker made to name
	// one), so a decode worker given its decode role and no connector has
	// none (PR #12568's docs: both halves of a NIXL pair must name the
	// connector for transfers to succeed).
	DecodeNoConnector bool
}

// GPUs is the deployment's GPU count.
func (d Deployment) GPUs() int {
	return d.PrefillReplicas*d.Prefill.TP*d.Prefill.PP*d.Prefill.DP + d.DecodeReplicas*d.Decode.TP*d.Decode.PP*d.Decode.DP
}

// replica is one engine of a deployment: its data-parallel ranks' cores
// and, on the prefill side, when its KV lane is next free.
type replica struct {
	cfg      Config
	cores    []*core
	busy     []bool
	ends     []float64
	linkFree float64
	prefill  bool
}

func newReplica(cfg Config, est MemoryEstimate, prefill bool) *replica {
	r := &replica{cfg: cfg, prefill: prefill, cores: make([]*core, cfg.DP), busy: make([]bool, cfg.DP), ends: make([]float64, cfg.DP)}
	for i := range r.cores {
		r.cores[i] = newCore(cfg, est)
	}
	return r
}

// leastLoaded is the rank a new request goes to, as the engine's own
// data-parallel balancing does (Virtual.enter).
func (r *replica) leastLoaded() int {
	best := 0
	for j := range r.cores {
		if r.cores[j].load() < r.cores[best].load() {
			best = j
		}
	}
	return best
}

// DisaggVirtual is a disaggregated deployment on a virtual clock, the
// counterpart of Virtual: a benchmark transport whose requests are each
// prefilled on a prefill engine (one token, as the router asks), their
// KV sent over the link (each prefill engine's lane carries one transfer
// at a time), and decoded on a decode engine that holds the pulled KV as
// computed (all but the prompt's last token, which it computes: the
// server's handshake, disagg.go). A client's first token is the decode
// engine's. The engines persist across phases. Not safe for concurrent
// use. What it leaves out: the router's own time, the prefill engine
// holding a request's blocks until the decode engine has read them, and
// transfers below the link's line rate.
type DisaggVirtual struct {
	d        Deployment
	link     Link
	pre, dec []*replica
	now      float64
	nextP    int // the router's round-robin, per side
	nextD    int
}

// NewDisaggVirtual starts the deployment's engines; the error is a
// *StartupError with the engine's message when a part does not fit.
func NewDisaggVirtual(d Deployment) (*DisaggVirtual, error) {
	if d.PrefillReplicas < 1 || d.DecodeReplicas < 1 {
		return nil, bad("a disaggregated deployment needs at least one prefill and one decode engine, got %d and %d", d.PrefillReplicas, d.DecodeReplicas)
	}
	link, err := LookupLink(d.Link)
	if err != nil {
		return nil, bad("%v", err)
	}
	v := &DisaggVirtual{link: link}
	for _, side := range []struct {
		cfg  *Config
		n    int
		reps *[]*replica
		name string
	}{{&d.Prefill, d.PrefillReplicas, &v.pre, RolePrefill}, {&d.Decode, d.DecodeReplicas, &v.dec, RoleDecode}} {
		side.cfg.KVRole = side.name
		if err := side.cfg.Normalize(); err != nil {
			return nil, fmt.Errorf("%s: %w", side.name, err)
		}
		est, err := Estimate(*side.cfg)
		if err != nil {
			return nil, err
		}
		for range side.n {
			*side.reps = append(*side.reps, newReplica(*side.cfg, est, side.name == RolePrefill))
		}
	}
	if d.Prefill.Model.ID != d.Decode.Model.ID {
		return nil, bad("prefill serves %s, decode %s: one model", d.Prefill.Model.ID, d.Decode.Model.ID)
	}
	v.d = d
	return v, nil
}

// Align leaves prompts as they are (Virtual.Align).
func (v *DisaggVirtual) Align(context.Context, []measure.Request, *rand.Rand) string {
	return "exact (virtual)"
}

// LengthsOnly tells the benchmark that prompt text is never read.
func (v *DisaggVirtual) LengthsOnly() bool { return true }

// Converses: Send runs a conversation's sessions closed loop (Virtual.Converses).
func (v *DisaggVirtual) Converses() bool { return true }

// disaggEvent is a request reaching an engine: its prefill (after the
// prefill server's front end) or its decode (after the decode server's
// front end and the KV's transfer).
type disaggEvent struct {
	id     int
	decode bool
}

// disaggRequest is one request's two sequences and where each runs.
type disaggRequest struct {
	pre, dec *seq
	preRep   *replica
	decRep   *replica
	preCore  int
	decCore  int
	phase    int // 0 front end, 1 prefill, 2 transfer, 3 decode, 4 done
}

// Send runs one phase (Virtual.Send's contract).
func (v *DisaggVirtual) Send(ctx context.Context, p measure.Phase) ([]measure.Record, time.Time) {
	wall := time.Now()
	r := disaggRun{v: v, phaseFeed: newPhaseFeed(p, v.now)}
	r.chunks = true // every chunk's time, whatever p.LatenciesOnly says
	runPhase(ctx, &r.phaseFeed, &r)
	return r.done(), wall
}

// disaggRun is one phase of a deployment on the virtual clock: its engines'
// side (phaseEngine).
type disaggRun struct {
	phaseFeed
	v      *DisaggVirtual
	reqs   []*disaggRequest
	events timeline[disaggEvent]
	// stepRep and stepCore are the replica and rank whose step ends
	// first (due).
	stepRep  *replica
	stepCore int
}

func (r *disaggRun) push(t float64, id int, decode bool) {
	r.events.push(t, disaggEvent{id: id, decode: decode})
}

func (r *disaggRun) clock() float64 { return r.v.now }

func (r *disaggRun) advance(t float64) { r.v.now = t }

func (r *disaggRun) due() (enter, step float64) {
	r.stepRep, r.stepCore, step = nil, -1, math.Inf(1)
	for _, side := range [][]*replica{r.v.pre, r.v.dec} {
		for _, rep := range side {
			for i := range rep.cores {
				if rep.busy[i] && rep.ends[i] < step {
					r.stepRep, r.stepCore, step = rep, i, rep.ends[i]
				}
			}
		}
	}
	return r.events.next(), step
}

func (r *disaggRun) enterNext() {
	_, e := r.events.pop()
	r.enter(e)
}

// stepEnd ends the step due (due): a prefill engine's or a decode
// engine's.
func (r *disaggRun) stepEnd() {
	rep, k := r.stepRep, r.stepCore
	emit := r.emitDecode
	if rep.prefill {
		emit = r.emitPrefill
	}
	rep.cores[k].commit(r.v.now, emit)
	r.start(rep, k)
}

func (r *disaggRun) observe()     {}
func (r *disaggRun) gaveUp() bool { return false }

// arrive sends the drawn request: it reaches a prefill engine, chosen
// round-robin, after that server's front end.
func (r *disaggRun) arrive() {
	v, q := r.v, r.next
	maxLen := min(v.d.Prefill.MaxModelLen, v.d.Decode.MaxModelLen)
	id, prompt, maxOut, ok := r.send(v.now, v.d.Prefill.Engine, maxLen)
	if !ok {
		r.reqs = append(r.reqs, nil)
		return
	}
	pre := &seq{id: id, prompt: prompt, maxOut: 1, prefixID: -1, filters: v.d.Prefill.DefaultSampling().Filters()}
	dec := &seq{id: id, prompt: prompt, maxOut: maxOut, prefixID: -1, remote: prompt - 1, filters: v.d.Decode.DefaultSampling().Filters()}
	if v.d.DecodeNoConnector {
		dec.remote = 0
	}
	pre.setPrefix(q)
	dec.setPrefix(q)
	req := &disaggRequest{pre: pre, dec: dec}
	req.preRep = v.pre[v.nextP%len(v.pre)]
	v.nextP++
	r.reqs = append(r.reqs, req)
	r.push(v.now+req.preRep.cfg.Constants.FrontendOverheadMs/1e3, id, false)
}

// enter hands a request to its engine: the prefill engine's least loaded
// rank, or, once its KV has landed, the decode engine's.
func (r *disaggRun) enter(e disaggEvent) {
	req := r.reqs[e.id]
	rep, s := req.preRep, req.pre
	if e.decode {
		rep, s = req.decRep, req.dec
	}
	s.arrival = r.v.now
	k := rep.leastLoaded()
	if e.decode {
		req.decCore, req.phase = k, 3
	} else {
		req.preCore, req.phase = k, 1
	}
	rep.cores[k].add(s)
	if !rep.busy[k] {
		r.start(rep, k)
	}
}

func (r *disaggRun) start(rep *replica, k int) {
	b, secs := rep.cores[k].schedule(r.v.now)
	if b.tokens == 0 {
		rep.busy[k] = false
		return
	}
	rep.busy[k], rep.ends[k] = true, r.v.now+secs
}

// emitPrefill: the prefill engine sampled its one token; the router now
// sends the request to a decode engine (round-robin), which pulls the
// prompt's KV over the link: the prefill engine's lane carries one
// transfer at a time.
func (r *disaggRun) emitPrefill(s *seq, last bool) {
	if !last {
		return
	}
	v := r.v
	req := r.reqs[s.id]
	req.decRep = v.dec[v.nextD%len(v.dec)]
	v.nextD++
	req.phase = 2
	from := v.now + req.decRep.cfg.Constants.FrontendOverheadMs/1e3
	if v.d.DecodeNoConnector {
		r.push(from, s.id, true) // nothing to pull: the decode engine prefills
		return
	}
	xfer := req.decRep.cfg.KVTransferSeconds(v.link, req.dec.remote, req.preRep.cfg.TP) - v.link.Latency
	start := math.Max(from, req.preRep.linkFree)
	req.preRep.linkFree = start + xfer
	r.push(start+xfer+v.link.Latency, s.id, true)
}

// emitDecode records a decode step's tokens, as Virtual.emit does: the
// decode engine streams them.
func (r *disaggRun) emitDecode(s *seq, last bool) {
	if last {
		r.reqs[s.id].phase = 4
	}
	r.emit(&r.v.d.Decode, s, r.v.now, last)
}

// abortUnfinished fails every unfinished request and takes it off its
// engine, so the engines are empty for the next phase.
func (r *disaggRun) abortUnfinished(class measure.ErrorClass, msg string) {
	for i, req := range r.reqs {
		if req == nil || req.phase == 4 {
			continue
		}
		switch req.phase {
		case 1:
			req.preRep.cores[req.preCore].abort(req.pre)
		case 3:
			req.decRep.cores[req.decCore].abort(req.dec)
		}
		r.fail(i, r.v.now, class, msg)
	}
	r.events.clear()
}
